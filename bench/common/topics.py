"""The synthetic users' world: 12 topics with things, extras, fact and episode sentence
templates, how-to actions and tips, and query templates (shared by ``recall_load.py`` and
``recall_latency.py``). ``fill`` turns a template into a sentence with random slots."""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["DAYS", "FACT_QUERIES", "HOWTO_QUERIES", "KEYWORD_QUERIES", "MONTHS", "PEOPLE",
           "PLACES", "TOPICS", "Topic", "fill"]

PEOPLE = ("Maya", "Tom", "Priya", "Lucas", "Aiko", "Omar", "Sofia", "Ben", "Lena", "Marco",
          "Chloe", "Ravi", "Nina", "Jonas", "Elena", "Sam", "Yuki", "Hugo", "Zara", "Felix")
PLACES = ("Lisbon", "Tokyo", "Berlin", "Seoul", "Prague", "Oslo", "Austin", "Paris", "Lima",
          "Cairo", "Sydney", "Boston", "Madrid", "Dublin", "Vienna", "Kyoto", "Montreal",
          "Edinburgh", "Porto", "Copenhagen")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")


@dataclass(frozen=True)
class Topic:
    """One subject a synthetic user talks about, with the words and templates for it."""

    name: str
    things: tuple[str, ...]
    extras: tuple[str, ...]
    facts: tuple[str, ...]
    episodes: tuple[str, ...]
    actions: tuple[str, ...]
    tips: tuple[str, ...]


TOPICS = (
    Topic("cooking",
          ("sourdough bread", "ramen", "lasagna", "green curry", "mushroom risotto",
           "pork dumplings", "fish tacos", "seafood paella", "beef pho", "banana bread",
           "kimchi", "basil pesto"),
          ("garlic", "coriander", "chili", "parmesan", "peanuts", "mushrooms", "red onions",
           "cream", "olives", "anchovies"),
          ("My favourite dish to cook is {thing}, usually with extra {extra}.",
           "I never put {extra} in my {thing}.",
           "I learned to make {thing} from {person} when I lived in {place}.",
           "I make {thing} about {num} times a month.",
           "My partner is allergic to {extra}, so I leave it out of the {thing}."),
          ("On {day} I cooked {thing} for {person} and it took {num} minutes longer than "
           "planned.",
           "In {month} I burned the {thing} because I forgot to turn down the heat.",
           "I took a {thing} cooking class in {place} with {person} in {month}.",
           "{person} came over on {day} and we made {thing} together with too much {extra}."),
          ("make", "store", "reheat", "freeze", "season"),
          ("use a heavy pan and keep the heat moderate", "weigh the ingredients instead of "
           "using cups", "let the dough rest overnight in the fridge", "taste and adjust the "
           "salt at the very end", "cool leftovers within two hours before freezing them")),
    Topic("running",
          ("half marathon", "10k race", "trail run", "interval session", "long run",
           "tempo run", "park run", "hill repeats", "recovery jog", "track workout"),
          ("knee pain", "new shoes", "a heart rate monitor", "energy gels", "a rain jacket",
           "a running club", "compression socks", "a headlamp"),
          ("My goal for the {thing} is to finish under {num} minutes.",
           "I always bring {extra} on a {thing}.",
           "I do my {thing} with {person} on {day} mornings.",
           "My personal best for the {thing} was set in {place}.",
           "I skip the {thing} when I have {extra}."),
          ("On {day} I did a {thing} in {place} and felt strong for the first {num} km.",
           "In {month} I had to stop the {thing} early because of {extra}.",
           "{person} paced me during the {thing} last {day} and we finished together.",
           "I ran the {thing} in {place} in {month} and got a medal."),
          ("train for", "recover from", "pace", "warm up for", "fuel for"),
          ("increase the weekly distance by no more than ten percent", "start slower than "
           "feels necessary", "drink water in small sips every twenty minutes", "sleep at "
           "least eight hours before a race", "stretch the calves after every session")),
    Topic("travel",
          ("flight", "hotel room", "train ticket", "rental car", "ferry crossing",
           "travel insurance", "airport lounge", "window seat", "city pass", "night bus"),
          ("a late checkout", "extra legroom", "breakfast included", "free cancellation",
           "a sea view", "a quiet floor", "a carry-on only", "a direct route"),
          ("I always book a {thing} with {extra}.",
           "My preferred {thing} for trips to {place} is with a local company.",
           "I keep my {thing} budget under {num} euros.",
           "I never take a {thing} without {extra}.",
           "{person} usually handles the {thing} when we travel together."),
          ("In {month} my {thing} to {place} was delayed by {num} hours.",
           "On {day} I booked a {thing} in {place} for {person}'s birthday.",
           "Last {month} I lost my {thing} documents in {place} and had to call the agency.",
           "{person} and I upgraded our {thing} in {place} on {day}."),
          ("book", "cancel", "change", "pay for", "claim a refund for"),
          ("book at least three weeks in advance", "keep a printed copy of the confirmation",
           "check the baggage allowance before paying", "request the refund within "
           "fourteen days", "compare the total price including fees")),
    Topic("gardening",
          ("tomato plants", "basil", "roses", "lemon tree", "herb bed", "compost heap",
           "raised bed", "orchids", "strawberries", "apple tree"),
          ("slugs", "aphids", "too much sun", "clay soil", "frost", "a drip hose",
           "coffee grounds", "bone meal"),
          ("My {thing} grows best with {extra}.",
           "I water the {thing} every {num} days in summer.",
           "I got my {thing} from a nursery in {place}.",
           "My biggest problem with the {thing} is {extra}.",
           "{person} gave me advice about the {thing}."),
          ("On {day} I repotted the {thing} and found {extra}.",
           "In {month} the {thing} produced {num} kilos.",
           "{person} helped me plant the {thing} on {day}.",
           "Last {month} the {thing} died after {extra}."),
          ("prune", "fertilize", "water", "repot", "protect"),
          ("water early in the morning at the base of the plant", "add compost twice a "
           "year", "cut back dead growth in late winter", "check the leaves weekly for pests",
           "cover young plants when frost is forecast")),
    Topic("photography",
          ("mirrorless camera", "50mm lens", "tripod", "film camera", "drone",
           "portrait session", "night photos", "photo walk", "Lightroom catalog", "flash"),
          ("a polarizing filter", "spare batteries", "a wide aperture", "raw files",
           "golden hour light", "a remote shutter", "high ISO", "a lens hood"),
          ("I mostly shoot with my {thing} and {extra}.",
           "My favourite spot for a {thing} is the old harbour in {place}.",
           "I spent {num} euros on the {thing}.",
           "I prefer {extra} for the {thing}.",
           "{person} taught me how to use the {thing}."),
          ("On {day} I did a {thing} in {place} and took {num} pictures.",
           "In {month} I dropped the {thing} and had to send it for repair.",
           "{person} and I went on a {thing} in {place} last {day}.",
           "Last {month} I sold my old {thing} to {person}."),
          ("clean", "calibrate", "back up", "set up", "update"),
          ("format the memory card in the camera, not on the computer", "shoot in raw when "
           "the light is difficult", "keep the sensor clean with a blower", "back up every "
           "shoot to two different drives", "update the firmware before a trip")),
    Topic("music",
          ("acoustic guitar", "piano lessons", "band rehearsal", "ukulele", "vinyl records",
           "jazz concert", "music theory", "drum kit", "choir", "songwriting"),
          ("a metronome", "new strings", "a capo", "noise cancelling headphones", "sheet music",
           "a tuner", "a practice journal", "a looper pedal"),
          ("I practise the {thing} for {num} minutes every evening.",
           "I use {extra} for my {thing}.",
           "My {thing} teacher is {person}.",
           "I bought my {thing} in a small shop in {place}.",
           "I find the {thing} easier with {extra}."),
          ("On {day} I went to a {thing} with {person} in {place}.",
           "In {month} I finally played a full song at the {thing}.",
           "{person} lent me {extra} for the {thing} last {day}.",
           "I recorded {num} takes during the {thing} on {day}."),
          ("tune", "practise", "restring", "record", "store"),
          ("practise slowly with a metronome before speeding up", "change the strings every "
           "three months", "keep the instrument away from heaters", "record yourself once a "
           "week to hear progress", "warm up the hands for five minutes first")),
    Topic("programming",
          ("Python project", "Rust side project", "code review", "CI pipeline",
           "Kubernetes cluster", "database migration", "unit tests", "API design",
           "open source library", "laptop setup"),
          ("type hints", "a dark theme", "vim keybindings", "small pull requests", "pair "
           "programming", "a standing desk", "property tests", "Docker"),
          ("I prefer {extra} in every {thing}.",
           "My {thing} runs on a server in {place}.",
           "I spend about {num} hours a week on the {thing}.",
           "{person} reviews my {thing}.",
           "I never start a {thing} without {extra}."),
          ("On {day} the {thing} broke and it took {num} hours to fix.",
           "In {month} I presented the {thing} at a meetup in {place}.",
           "{person} and I finished the {thing} on {day} after a long week.",
           "Last {month} I rewrote the {thing} using {extra}."),
          ("deploy", "debug", "configure", "test", "migrate"),
          ("run the test suite locally before pushing", "pin every dependency version",
           "roll out to a staging environment first", "keep secrets out of the repository",
           "write the migration so it can be rolled back")),
    Topic("money",
          ("monthly budget", "savings account", "credit card", "rent", "index fund",
           "tax return", "phone plan", "electricity bill", "gym membership", "car loan"),
          ("automatic payments", "a spreadsheet", "paper statements", "a fixed rate",
           "cashback", "a joint account", "quarterly reviews", "no annual fee"),
          ("My {thing} is about {num} euros.",
           "I pay the {thing} with {extra}.",
           "I want a {thing} with {extra}.",
           "{person} helps me with the {thing}.",
           "I moved my {thing} to a bank in {place}."),
          ("On {day} I paid the {thing} late and got a {num} euro fee.",
           "In {month} I renegotiated the {thing} with {person}'s help.",
           "Last {month} the {thing} went up by {num} percent.",
           "{person} and I reviewed the {thing} on {day}."),
          ("cancel", "pay", "reduce", "dispute a charge on", "set up"),
          ("pay before the due date to avoid the late fee", "keep receipts for at least six "
           "years", "review recurring charges every quarter", "dispute a charge within sixty "
           "days", "set up automatic payments from the main account")),
    Topic("health",
          ("dentist appointment", "yoga class", "physiotherapy", "blood test",
           "allergy medication", "eye exam", "sleep schedule", "vitamin D", "flu shot",
           "back pain"),
          ("pollen", "lactose", "ibuprofen", "early mornings", "caffeine", "long flights",
           "cold weather", "screen time"),
          ("My {thing} is every {num} weeks.",
           "I react badly to {extra}, so I mention it before every {thing}.",
           "My doctor for the {thing} is {person}.",
           "I get my {thing} at a clinic in {place}.",
           "The {thing} gets worse with {extra}."),
          ("On {day} I had my {thing} and it went fine.",
           "In {month} I missed the {thing} because of {extra}.",
           "{person} drove me to the {thing} on {day}.",
           "Last {month} the {thing} cost {num} euros."),
          ("book", "prepare for", "reschedule", "get a refund for", "manage"),
          ("arrive ten minutes early with your insurance card", "cancel at least a day "
           "ahead to avoid a charge", "bring a list of current medication", "avoid food for "
           "eight hours before the test", "ask for a written summary afterwards")),
    Topic("pets",
          ("dog", "cat", "vet visit", "dog walker", "pet insurance", "puppy training",
           "cat food", "fish tank", "dog park", "pet sitter"),
          ("grain-free food", "a long leash", "a GPS collar", "a scratching post",
           "a crate", "treats", "a water fountain", "a harness"),
          ("My {thing} needs {extra}.",
           "The {thing} costs me about {num} euros a month.",
           "{person} is my usual {thing}.",
           "We found our {thing} in {place}.",
           "I only buy {thing} supplies with {extra}."),
          ("On {day} the {thing} went badly and we left after {num} minutes.",
           "In {month} I took the {thing} to {place} for the first time.",
           "{person} looked after the {thing} on {day}.",
           "Last {month} the {thing} needed {extra} after an accident."),
          ("train", "feed", "register", "insure", "travel with"),
          ("keep vaccinations up to date and carry the record", "introduce new food over "
           "seven days", "use short training sessions with rewards", "microchip and "
           "register the animal", "book the sitter two weeks ahead in summer")),
    Topic("books",
          ("science fiction novel", "biography", "book club", "audiobook", "poetry collection",
           "crime novel", "library card", "e-reader", "history book", "cookbook"),
          ("a paper copy", "large print", "a reading light", "short chapters", "footnotes",
           "a bookmark", "subtitles", "a reading list"),
          ("I read a {thing} every {num} weeks.",
           "I prefer a {thing} with {extra}.",
           "{person} recommends most of my {thing} picks.",
           "My favourite {thing} is set in {place}.",
           "I listen to the {thing} on the commute."),
          ("On {day} I finished the {thing} that {person} lent me.",
           "In {month} our {thing} met in {place}.",
           "Last {month} I lost the {thing} on a train to {place}.",
           "I spent {num} euros on the {thing} on {day}."),
          ("borrow", "return", "renew", "download", "donate"),
          ("return items within twenty one days to avoid fines", "renew online up to three "
           "times", "download titles over wifi before travelling", "reserve popular books "
           "early", "donate books in good condition only")),
    Topic("cycling",
          ("road bike", "commute", "bike lock", "gravel ride", "cycling tour",
           "bike service", "e-bike", "spin class", "tyre pressure", "mountain bike"),
          ("a flat tyre", "mudguards", "clip-in pedals", "a front light", "a rear rack",
           "tubeless tyres", "a helmet mirror", "headwind"),
          ("My {thing} has {extra}.",
           "I do the {thing} {num} days a week.",
           "I bought the {thing} from {person}.",
           "My favourite {thing} route goes through {place}.",
           "I avoid the {thing} when there is {extra}."),
          ("On {day} I got {extra} on the {thing} near {place}.",
           "In {month} the {thing} was {num} km long.",
           "{person} joined the {thing} on {day}.",
           "Last {month} the {thing} cost {num} euros."),
          ("maintain", "lock", "adjust", "pack for", "insure"),
          ("check the tyre pressure before every ride", "lock the frame and the front wheel",
           "clean and oil the chain every two weeks", "carry a spare tube and a pump",
           "have the brakes serviced twice a year")),
)

FACT_QUERIES = ("what did I say about {thing}?", "what is my favourite {thing}?",
                "did I mention {thing} with {person}?", "what do I usually do for {thing}?",
                "remind me what I told you about {thing}", "when did I last have {thing}?",
                "what was my problem with {thing}?", "how much did my {thing} cost?")
HOWTO_QUERIES = ("how do I {action} {thing}?", "how to {action} {thing}",
                 "what is the best way to {action} {thing}?",
                 "is there a guide on how to {action} {thing}?")
KEYWORD_QUERIES = ("{thing} {place}", "{thing} with {person}", "{thing} on {day}",
                   "{thing} {extra}")


def fill(template: str, rng: random.Random, topic: Topic, thing: str | None = None) -> str:
    """The template with its slots drawn from ``topic`` and the shared lists, capitalised."""
    text = template.format(
        thing=thing or rng.choice(topic.things), extra=rng.choice(topic.extras),
        person=rng.choice(PEOPLE), place=rng.choice(PLACES), day=rng.choice(DAYS),
        month=rng.choice(MONTHS), num=rng.choice((2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30,
                                                  40, 45, 60, 90, 120, 150, 200, 300)),
        action=rng.choice(topic.actions))
    return text[0].upper() + text[1:]

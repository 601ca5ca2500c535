"""A local transformer run by ONNX Runtime instead of torch: the same hidden states (to float
rounding), at about a third of torch's CPU for one short query (docs/benchmarks.md, "The
local model on ONNX Runtime").

The graph is exported from the loaded torch model once and kept in a cache directory under a
name made of the weights' digest and the versions that shape the graph, so every process of
a node (shards, extractors, the ingress) loads the file the first one wrote. A graph is used
only after it gave the torch model's hidden states on a probe batch; otherwise the caller
keeps torch (``OnnxUnavailable``)."""

from __future__ import annotations

import copy
import fcntl
import hashlib
import logging
import os
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["INPUTS", "OnnxEncoder", "OnnxUnavailable", "default_cache_dir"]

logger = logging.getLogger(__name__)
INPUTS = ("input_ids", "attention_mask", "token_type_ids")  # the ones a tokenizer gives
OPSET = 17
TOLERANCE = 1e-3  # largest difference from torch's hidden states a graph may show
PROBE = ["What did I tell you about my sister's new job in Denver last spring?",
         "ok", "我上周说过的那家餐厅叫什么名字？", "Remember: the budget is $4,500, not $3,000."]


class OnnxUnavailable(RuntimeError):
    """ONNX Runtime cannot run this model here (not installed, export failed, or its graph
    does not reproduce torch's vectors); the message says which."""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/strata/onnx`` (``~/.cache/strata/onnx``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "strata" / "onnx"


class OnnxEncoder:
    """``hidden(encoded)``: a transformer's last hidden states for a tokenizer's numpy
    output, by ONNX Runtime on the CPU, with ``threads`` intra-op threads that sleep when
    idle (spinning threads would take cores from the other processes of a small node)."""

    def __init__(self, path: Path, names: Sequence[str], threads: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(path), options,
                                             providers=["CPUExecutionProvider"])
        self._names = list(names)
        self.path = path

    def hidden(self, encoded: Mapping[str, Any]) -> npt.NDArray[np.float32]:
        feed = {name: np.asarray(encoded[name], dtype=np.int64) for name in self._names}
        return np.asarray(self._session.run(None, feed)[0], dtype=np.float32)

    @classmethod
    def for_model(cls, bert: Any, tokenizer: Any, threads: int,
                  cache_dir: Path | None = None) -> OnnxEncoder:
        """The encoder of the torch model ``bert``: its cached graph, or one exported now;
        checked against ``bert`` on ``PROBE`` before it is returned."""
        try:
            import onnx  # noqa: F401  (the exporter writes with it)
            import onnxruntime  # noqa: F401
            import torch
        except ImportError as exc:
            raise OnnxUnavailable(f"onnx or onnxruntime is not installed ({exc})") from exc
        probe = tokenizer(PROBE, padding=True, return_tensors="pt")
        names = [name for name in INPUTS if name in probe]
        directory = cache_dir or default_cache_dir()
        path = directory / "model.onnx"
        try:
            path = directory / f"{_digest(bert, names)}.onnx"
            directory.mkdir(parents=True, exist_ok=True)
            with _locked(directory / ".lock"):
                if not path.is_file():
                    _export(bert, probe, names, path)
        except Exception as exc:  # torch's exporter and the file system raise many types
            raise OnnxUnavailable(f"exporting the model to {path} failed: {exc}") from exc
        try:
            encoder = cls(path, names, threads)
            with torch.inference_mode():
                expected = bert(**probe).last_hidden_state.numpy()
            got = encoder.hidden({name: probe[name].numpy() for name in names})
        except Exception as exc:  # onnxruntime raises its own exception types
            raise OnnxUnavailable(f"onnxruntime cannot run {path}: {exc}") from exc
        mask = probe["attention_mask"].numpy().astype(bool)
        gap = float(np.abs(got - expected)[mask].max()) if got.shape == expected.shape else np.inf
        if gap > TOLERANCE:
            raise OnnxUnavailable(f"the graph in {path} differs from the torch model by "
                                  f"{gap:.3g} (more than {TOLERANCE})")
        return encoder


def _digest(bert: Any, names: Sequence[str]) -> str:
    """The weights' digest and everything else the exported graph depends on."""
    import onnx
    import torch
    import transformers

    h = hashlib.sha256()
    for key, tensor in sorted(bert.state_dict().items()):
        h.update(key.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    h.update(repr((type(bert).__name__, list(names), OPSET, torch.__version__,
                   transformers.__version__, onnx.__version__)).encode())
    return f"{type(bert).__name__.lower()}-{h.hexdigest()[:24]}"


def _export(bert: Any, probe: Mapping[str, Any], names: Sequence[str], path: Path) -> None:
    """Export a copy of ``bert`` (the exporter changes the module it traces, so the live
    model would drift from its own graph) to ``path``, written whole or not at all."""
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: Any) -> Any:
            return self.model(**dict(zip(names, inputs, strict=True))).last_hidden_state

    axes = {name: {0: "batch", 1: "tokens"} for name in (*names, "hidden")}
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".onnx.tmp")
    os.close(fd)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on data-dependent branches
            torch.onnx.export(Hidden(copy.deepcopy(bert)).eval(),
                              tuple(probe[name] for name in names), tmp,
                              input_names=list(names), output_names=["hidden"],
                              dynamic_axes=axes, opset_version=OPSET, dynamo=False)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep it from the node's other users
        os.replace(tmp, path)
        logger.info("exported the embedding model to %s", path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class _locked:
    """An exclusive ``flock`` on ``path`` for the ``with`` block: one process of a node
    exports while the others wait for its file."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd = -1

    def __enter__(self) -> None:
        self._fd = os.open(self._path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)

"""New weights for a live torch model: read them, check them, copy them in place.

The ``transformers`` backend takes new weights without a restart: a state dict
handed over in-process, or a safetensors file or Hugging Face model directory
on disk (:func:`read_weights`). :func:`swap_weights` checks every name and shape
against the live model *before* it copies anything, so a wrong checkpoint
leaves the served weights untouched; then it copies the tensors into the
existing parameters (``load_state_dict``), so the model object, its tokenizer
and anything holding a reference to it stay as they are.

Tied parameters (GPT-2's ``lm_head.weight`` is ``transformer.wte.weight``) are
saved once by ``save_pretrained``; a state dict may leave out a name whose
tensor is shared with a name it has.

torch and safetensors are imported inside the functions, so importing this
module costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from megaflow.core.errors import InvalidInput

_SHOWN = 5  # names listed in an error message


def read_weights(source: str | Path) -> dict[str, Any]:
    """The tensors of a ``.safetensors`` file, or of every ``*.safetensors`` shard
    in a model directory (``model.safetensors`` or ``model-0000N-of-0000M``)."""
    from safetensors.torch import load_file

    path = Path(source)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise InvalidInput(f"no *.safetensors file in {path}; save the model with safetensors")
    else:
        raise InvalidInput(f"weights path {path} does not exist")
    tensors: dict[str, Any] = {}
    for f in files:
        try:
            part = load_file(f)
        except Exception as exc:  # safetensors raises its own error types
            raise InvalidInput(f"cannot read weights from {f}: {exc}") from exc
        twice = sorted(set(part) & set(tensors))
        if twice:
            raise InvalidInput(f"{f} repeats tensors of another shard: {twice[:_SHOWN]}")
        tensors.update(part)
    return tensors


def swap_weights(model: Any, weights: Mapping[str, Any]) -> None:
    """Copy ``weights`` into ``model``'s parameters and buffers, in place.

    Raises InvalidInput, with nothing copied, when a name is unknown, a shape
    differs, a value is not a tensor, or a parameter would be left without a
    value (other than one tied to a parameter that gets one).
    """
    import torch

    live = model.state_dict()
    unknown = sorted(set(weights) - set(live))
    if unknown:
        raise InvalidInput(
            f"the new weights have {len(unknown)} names the model does not: {unknown[:_SHOWN]}"
        )
    for name, value in weights.items():
        if not isinstance(value, torch.Tensor):
            raise InvalidInput(f"weight {name!r} is a {type(value).__name__}, not a tensor")
        if tuple(value.shape) != tuple(live[name].shape):
            raise InvalidInput(
                f"weight {name!r} has shape {tuple(value.shape)}; "
                f"the model has {tuple(live[name].shape)}"
            )
    given = {live[name].data_ptr() for name in weights}
    missing = sorted(n for n in set(live) - set(weights) if live[n].data_ptr() not in given)
    if missing:
        raise InvalidInput(
            f"the new weights lack {len(missing)} of the model's tensors: {missing[:_SHOWN]}"
        )
    with torch.no_grad():
        model.load_state_dict(dict(weights), strict=False)

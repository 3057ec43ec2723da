"""Model cards: the few numbers of a checkpoint that decide how SGLang sizes GPU memory.

Standard library only: the simulator engine imports this on hosts that have no pydantic.

A card comes from one of three places (`load_model_card`):
- a card shipped in `fleet/host/modelcards/<name>.json` ("qwen3.6-27b", "qwen3.6-27b-dflash");
- a JSON card file written in the same format;
- a Hugging Face style model directory: `config.json` (the text model's fields may be nested under
  `text_config`, as in Qwen3.5/3.6 `...ForConditionalGeneration` checkpoints) plus
  `model.safetensors.index.json` (its `metadata.total_size`) or the `*.safetensors` files' sizes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from fleet.host.errors import ConfigError

SHIPPED_CARDS_DIR = Path(__file__).resolve().parent / "modelcards"

# Bytes per element of the dtypes a card may name (torch names, plus SGLang's --kv-cache-dtype spellings).
DTYPE_BYTES: Mapping[str, int] = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}
_DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}


@dataclass(frozen=True)
class ModelCard:
    name: str
    architecture: str
    # Bytes of weights SGLang holds on the GPUs once loaded, summed over all TP ranks.
    weights_bytes: int
    num_hidden_layers: int
    full_attention_layer_ids: tuple[int, ...]
    linear_attention_layer_ids: tuple[int, ...]
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    kv_dtype: str
    max_position_embeddings: int
    vocab_size: int
    is_multimodal: bool
    # Gated DeltaNet ("mamba") state geometry; None for dense models.
    linear_num_key_heads: int | None = None
    linear_num_value_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_value_head_dim: int | None = None
    linear_conv_kernel_dim: int | None = None
    mamba_ssm_dtype: str | None = None
    # What SGLang's adjust_mem_fraction_for_vlm reads from vision_config (None -> its defaults 24 / 1024).
    vision_num_hidden_layers: int | None = None
    vision_hidden_size: int | None = None
    # DFlash drafters: the block size SGLang takes as --speculative-num-draft-tokens when unset.
    dflash_block_size: int | None = None
    checkpoint_bytes: int | None = None
    hf_repo: str | None = None
    # Where each value came from, field name -> free text. Not part of equality.
    source: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def is_hybrid(self) -> bool:
        """True for hybrid full-attention + linear-attention (GDN/mamba) models."""
        return bool(self.linear_attention_layer_ids)

    @property
    def context_length(self) -> int:
        """The context length SGLang derives when --context-length is not given."""
        return self.max_position_embeddings


_REQUIRED_INT = (
    "weights_bytes",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
    "vocab_size",
)
_OPTIONAL_INT = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "vision_num_hidden_layers",
    "vision_hidden_size",
    "dflash_block_size",
    "checkpoint_bytes",
)
_LINEAR_FIELDS = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)


def shipped_card_names() -> list[str]:
    return sorted(p.stem for p in SHIPPED_CARDS_DIR.glob("*.json"))


def load_model_card(name_or_path: str | Path) -> ModelCard:
    """Load a shipped card by name, a JSON card file, or a Hugging Face style model directory."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return _card_from_hf_dir(path)
    if path.is_file():
        return card_from_dict(_read_json(path), path)
    shipped = _shipped_card(str(name_or_path).lower())
    if shipped is not None:
        return shipped
    raise ConfigError(
        str(name_or_path),
        "",
        f"a shipped model card name ({', '.join(shipped_card_names())}), a JSON card file or a model directory containing config.json",
    )


@lru_cache(maxsize=None)
def _shipped_card(name: str) -> ModelCard | None:
    """A card shipped with fleet (package data, read once per process: a plan loads the card of
    every server it checks), None where there is none of that name."""
    path = SHIPPED_CARDS_DIR / f"{name}.json"
    return card_from_dict(_read_json(path), path) if path.is_file() else None


def card_from_dict(data: Any, origin: Path | str) -> ModelCard:
    """Validate a card in the shipped JSON format; errors name `origin` and the field."""
    if not isinstance(data, dict):
        raise ConfigError(origin, "", "a JSON object", type(data).__name__)
    known = {f.name for f in fields(ModelCard)} | {"hf_repo"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(origin, unknown[0], "a known model card field", data[unknown[0]])
    values: dict[str, Any] = {
        "name": _string(data, "name", origin),
        "architecture": _string(data, "architecture", origin),
        "kv_dtype": _dtype(data, "kv_dtype", origin),
        "is_multimodal": _bool(data, "is_multimodal", origin),
        "mamba_ssm_dtype": _dtype(data, "mamba_ssm_dtype", origin) if data.get("mamba_ssm_dtype") is not None else None,
        "hf_repo": _optional_string(data, "hf_repo", origin),
        "source": _source(data, origin),
    }
    for name in _REQUIRED_INT:
        values[name] = _positive_int(data, name, origin)
    for name in _OPTIONAL_INT:
        values[name] = _positive_int(data, name, origin) if data.get(name) is not None else None
    values["full_attention_layer_ids"] = _layer_ids(data, "full_attention_layer_ids", origin, values["num_hidden_layers"])
    values["linear_attention_layer_ids"] = _layer_ids(data, "linear_attention_layer_ids", origin, values["num_hidden_layers"])
    overlap = set(values["full_attention_layer_ids"]) & set(values["linear_attention_layer_ids"])
    if overlap:
        raise ConfigError(origin, "linear_attention_layer_ids", "no layer id also listed as full attention", sorted(overlap))
    card = ModelCard(**values)
    if card.is_hybrid:
        for name in _LINEAR_FIELDS:
            if getattr(card, name) is None:
                raise ConfigError(origin, name, "a positive integer (the model has linear-attention layers)")
        if card.mamba_ssm_dtype is None:
            raise ConfigError(origin, "mamba_ssm_dtype", "float32, bfloat16 or float16 (the model has linear-attention layers)")
    return card


def _card_from_hf_dir(directory: Path) -> ModelCard:
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise ConfigError(directory, "config.json", "a Hugging Face model directory with config.json")
    config = _read_json(config_path)
    if not isinstance(config, dict):
        raise ConfigError(config_path, "", "a JSON object", type(config).__name__)
    text = config.get("text_config", config)
    if not isinstance(text, dict):
        raise ConfigError(config_path, "text_config", "a JSON object", type(text).__name__)

    def text_field(key: str) -> str:
        return f"text_config.{key}" if text is not config else key

    architectures = config.get("architectures")
    if not (isinstance(architectures, list) and architectures and isinstance(architectures[0], str)):
        raise ConfigError(config_path, "architectures", "a non-empty list of class names", architectures)
    num_layers = _positive_int(text, "num_hidden_layers", config_path, text_field("num_hidden_layers"))
    full_ids, linear_ids = _hf_layer_split(text, num_layers, config_path, text_field)
    num_heads = _positive_int(text, "num_attention_heads", config_path, text_field("num_attention_heads"))
    hidden = _positive_int(text, "hidden_size", config_path, text_field("hidden_size"))
    head_dim = text.get("head_dim") or hidden // num_heads
    dtype_value = text.get("dtype") or text.get("torch_dtype") or config.get("dtype") or config.get("torch_dtype") or "bfloat16"
    vision = config.get("vision_config")
    block_size = config.get("block_size")
    dflash_config = config.get("dflash_config")
    if block_size is None and isinstance(dflash_config, dict):
        block_size = dflash_config.get("block_size")
    data: dict[str, Any] = {
        "name": directory.name,
        "architecture": architectures[0],
        "weights_bytes": _hf_weights_bytes(directory),
        "num_hidden_layers": num_layers,
        "full_attention_layer_ids": full_ids,
        "linear_attention_layer_ids": linear_ids,
        "num_attention_heads": num_heads,
        "num_key_value_heads": text.get("num_key_value_heads", num_heads),
        "head_dim": head_dim,
        "kv_dtype": dtype_value,
        "max_position_embeddings": text.get("max_position_embeddings"),
        "vocab_size": text.get("vocab_size"),
        "is_multimodal": isinstance(vision, dict),
        "vision_num_hidden_layers": vision.get("num_hidden_layers") if isinstance(vision, dict) else None,
        "vision_hidden_size": vision.get("hidden_size") if isinstance(vision, dict) else None,
        "dflash_block_size": block_size,
        "source": {"*": f"{config_path} (weights: {directory})"},
    }
    if linear_ids:
        for name in _LINEAR_FIELDS:
            data[name] = text.get(name)
        # SGLang: --mamba-ssm-dtype / config mamba_ssm_dtype, float32 when absent (configs/mamba_utils.py).
        data["mamba_ssm_dtype"] = text.get("mamba_ssm_dtype") or "float32"
    try:
        return card_from_dict(data, config_path)
    except ConfigError as err:
        # Re-point field names at where they live in config.json.
        if err.field in text and text is not config:
            raise ConfigError(config_path, f"text_config.{err.field}", err.expected, err.got) from None
        raise


def _hf_layer_split(text: dict[str, Any], num_layers: int, origin: Path, text_field: Any) -> tuple[list[int], list[int]]:
    """Full vs linear attention layer ids, derived as SGLang does for Qwen3-Next/3.5."""
    interval = text.get("full_attention_interval")
    if interval is not None:
        if not isinstance(interval, int) or isinstance(interval, bool) or interval <= 0:
            raise ConfigError(origin, text_field("full_attention_interval"), "a positive integer", interval)
        # configs/qwen3_next.py layers_block_type: layer l is full attention when (l + 1) % interval == 0.
        full = [i for i in range(num_layers) if (i + 1) % interval == 0]
        return full, [i for i in range(num_layers) if (i + 1) % interval != 0]
    layer_types = text.get("layer_types")
    if layer_types is None:
        return list(range(num_layers)), []
    if not (isinstance(layer_types, list) and len(layer_types) == num_layers and all(isinstance(t, str) for t in layer_types)):
        raise ConfigError(origin, text_field("layer_types"), f"a list of {num_layers} layer type names", layer_types)
    linear = [i for i, kind in enumerate(layer_types) if kind == "linear_attention"]
    full = [i for i, kind in enumerate(layer_types) if kind != "linear_attention"]
    return full, linear


def _hf_weights_bytes(directory: Path) -> int:
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        data = _read_json(index)
        total = data.get("metadata", {}).get("total_size") if isinstance(data, dict) else None
        if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
            raise ConfigError(index, "metadata.total_size", "a positive integer (bytes)", total)
        return total
    shards = sorted(directory.glob("*.safetensors"))
    if not shards:
        raise ConfigError(directory, "weights", "model.safetensors.index.json or *.safetensors files")
    return sum(shard.stat().st_size for shard in shards)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(path, "", "a readable file", str(err)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(path, "", "valid JSON", str(err)) from None


def _string(data: dict[str, Any], key: str, origin: Path | str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(origin, key, "a non-empty string", value)
    return value


def _optional_string(data: dict[str, Any], key: str, origin: Path | str) -> str | None:
    return None if data.get(key) is None else _string(data, key, origin)


def _bool(data: dict[str, Any], key: str, origin: Path | str) -> bool:
    value = data.get(key)
    if not isinstance(value, bool):
        raise ConfigError(origin, key, "true or false", value)
    return value


def _positive_int(data: dict[str, Any], key: str, origin: Path | str, shown_as: str | None = None) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(origin, shown_as or key, "a positive integer", value)
    return value


def _dtype(data: dict[str, Any], key: str, origin: Path | str) -> str:
    value = data.get(key)
    name = _DTYPE_ALIASES.get(value, value) if isinstance(value, str) else value
    if not isinstance(name, str) or name not in DTYPE_BYTES:
        raise ConfigError(origin, key, f"one of {', '.join(DTYPE_BYTES)}", value)
    return name


def _layer_ids(data: dict[str, Any], key: str, origin: Path | str, num_layers: int) -> tuple[int, ...]:
    value = data.get(key)
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < num_layers for i in value):
        raise ConfigError(origin, key, f"a list of layer ids in [0, {num_layers})", value)
    if len(set(value)) != len(value):
        raise ConfigError(origin, key, "distinct layer ids", value)
    return tuple(sorted(value))


def _source(data: dict[str, Any], origin: Path | str) -> dict[str, str]:
    value = data.get("source", {})
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError(origin, "source", "an object mapping field names to text")
    return dict(value)


def hf_files_from_card(card: ModelCard) -> dict[str, Any]:
    """A weightless Hugging Face style model directory for a card: `config.json` and a
    `model.safetensors.index.json` that declares the weights' size.

    This is what the sim engine serves: `load_model_card` on the directory gives the card back. No
    weights are needed (the simulator has no GPU to put them on), so a sim host never downloads any.
    """
    layer_types = ["linear_attention" if i in card.linear_attention_layer_ids else "full_attention" for i in range(card.num_hidden_layers)]
    text: dict[str, Any] = {
        "num_hidden_layers": card.num_hidden_layers,
        "layer_types": layer_types,
        "num_attention_heads": card.num_attention_heads,
        "hidden_size": card.num_attention_heads * card.head_dim,
        "head_dim": card.head_dim,
        "num_key_value_heads": card.num_key_value_heads,
        "dtype": card.kv_dtype,
        "max_position_embeddings": card.max_position_embeddings,
        "vocab_size": card.vocab_size,
    }
    if card.is_hybrid:
        text.update({name: getattr(card, name) for name in _LINEAR_FIELDS})
        text["mamba_ssm_dtype"] = card.mamba_ssm_dtype
    config: dict[str, Any] = {"architectures": [card.architecture], "text_config": text}
    if card.is_multimodal:
        vision = {"num_hidden_layers": card.vision_num_hidden_layers, "hidden_size": card.vision_hidden_size}
        config["vision_config"] = {key: value for key, value in vision.items() if value is not None}
    if card.dflash_block_size:
        config["block_size"] = card.dflash_block_size
    index = {"metadata": {"total_size": card.weights_bytes}, "weight_map": {}}
    return {"config.json": config, "model.safetensors.index.json": index}

"""Model cards: shipped cards, JSON cards and Hugging Face style directories."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fleet.errors import ConfigError
from fleet.host.modelcard import ModelCard, hf_files_from_card, load_model_card, shipped_card_names


def test_shipped_target_card_matches_the_qwen36_config() -> None:
    card = load_model_card("qwen3.6-27b")

    assert card.architecture == "Qwen3_5ForConditionalGeneration"
    assert card.num_hidden_layers == 64
    assert card.full_attention_layer_ids == tuple(range(3, 64, 4))
    assert len(card.linear_attention_layer_ids) == 48
    assert (card.num_key_value_heads, card.head_dim) == (4, 256)
    assert card.is_hybrid and card.is_multimodal
    assert card.context_length == 262144
    assert round(card.weights_bytes / (1 << 30), 2) == 51.05


def test_every_shipped_card_says_where_its_values_come_from() -> None:
    for name in shipped_card_names():
        card = load_model_card(name)
        for field in ("architecture", "num_hidden_layers", "weights_bytes", "num_key_value_heads", "head_dim"):
            assert card.source.get(field), f"{name}: no source for {field}"


def test_shipped_draft_card_is_a_small_dense_drafter() -> None:
    card = load_model_card("qwen3.6-27b-dflash")
    assert card.architecture == "DFlashDraftModel"
    assert card.num_hidden_layers == 5 and not card.is_hybrid
    assert card.dflash_block_size == 16


def _write_hf_dir(root: Path, text_config: dict, weights: str = "index") -> Path:
    root.mkdir()
    config = {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "text_config": text_config,
        "vision_config": {"depth": 2, "hidden_size": 64},
    }
    (root / "config.json").write_text(json.dumps(config))
    if weights == "index":
        (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123456}, "weight_map": {}}))
    else:
        (root / "model-00001-of-00002.safetensors").write_bytes(b"\0" * 1000)
        (root / "model-00002-of-00002.safetensors").write_bytes(b"\0" * 24)
    return root


TINY_TEXT_CONFIG = {
    "num_hidden_layers": 8,
    "full_attention_interval": 4,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "dtype": "bfloat16",
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 8,
    "linear_value_head_dim": 8,
    "linear_conv_kernel_dim": 4,
    "max_position_embeddings": 4096,
    "vocab_size": 1000,
}


def test_hf_dir_with_nested_text_config(tmp_path: Path) -> None:
    card = load_model_card(_write_hf_dir(tmp_path / "tiny-qwen", TINY_TEXT_CONFIG))

    assert card.name == "tiny-qwen"
    assert card.weights_bytes == 123456
    assert card.full_attention_layer_ids == (3, 7)
    assert card.linear_attention_layer_ids == (0, 1, 2, 4, 5, 6)
    assert card.mamba_ssm_dtype == "float32"  # SGLang's default when the config has none
    assert card.is_multimodal and card.vision_hidden_size == 64
    assert card.context_length == 4096


def test_hf_dir_without_index_sums_the_safetensors(tmp_path: Path) -> None:
    card = load_model_card(_write_hf_dir(tmp_path / "m", TINY_TEXT_CONFIG, weights="files"))
    assert card.weights_bytes == 1024


def test_hf_dir_error_names_the_nested_field(tmp_path: Path) -> None:
    broken = dict(TINY_TEXT_CONFIG, num_key_value_heads="four")
    directory = _write_hf_dir(tmp_path / "broken", broken)
    with pytest.raises(ConfigError) as err:
        load_model_card(directory)
    assert err.value.path == str(directory / "config.json")
    assert err.value.field == "text_config.num_key_value_heads"


def test_malformed_json_card_names_file_and_field(tmp_path: Path) -> None:
    data = json.loads((Path(__file__).resolve().parents[2] / "fleet/host/modelcards/qwen3.6-27b.json").read_text())
    data["head_dim"] = -1
    card_path = tmp_path / "card.json"
    card_path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as err:
        load_model_card(card_path)
    assert err.value.path == str(card_path)
    assert err.value.field == "head_dim"
    assert "positive integer" in str(err.value)


def test_hybrid_card_without_gdn_geometry_is_refused(tmp_path: Path) -> None:
    data = json.loads((Path(__file__).resolve().parents[2] / "fleet/host/modelcards/qwen3.6-27b.json").read_text())
    data["linear_num_value_heads"] = None
    card_path = tmp_path / "card.json"
    card_path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="linear_num_value_heads"):
        load_model_card(card_path)


def test_invalid_json_names_the_file(tmp_path: Path) -> None:
    card_path = tmp_path / "card.json"
    card_path.write_text("{not json")
    with pytest.raises(ConfigError, match="valid JSON") as err:
        load_model_card(card_path)
    assert err.value.path == str(card_path)


def test_unknown_name_lists_the_shipped_cards() -> None:
    with pytest.raises(ConfigError, match="qwen3.6-27b-dflash"):
        load_model_card("no-such-model")


@pytest.mark.parametrize("name", ["qwen3.6-27b", "qwen3.6-27b-dflash"])
def test_weightless_model_dir_gives_the_card_back(tmp_path: Path, name: str) -> None:
    """What a sim host serves: config.json + an index declaring the weights' size, and no weights."""
    card = load_model_card(name)
    directory = tmp_path / name
    directory.mkdir()
    for file_name, content in hf_files_from_card(card).items():
        (directory / file_name).write_text(json.dumps(content))
    back = load_model_card(directory)
    ignored = {"checkpoint_bytes", "hf_repo"}  # not in a config.json
    for field in dataclasses.fields(ModelCard):
        if field.compare and field.name not in ignored:
            assert getattr(back, field.name) == getattr(card, field.name), field.name

"""Tokenizer construction, reproducible initialisation and training, frozen embeddings."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoTokenizer

from mibspec.reference_impl.datasets import SPLITS, TASKS, generate, lexicon, vocabulary_texts
from mibspec_dev.training.loop import (
    EncodedExamples,
    Example,
    TrainingConfig,
    _batches,
    deterministic_torch,
    encode_examples,
    last_position_logits,
    train_model,
)
from mibspec_dev.training.models import (
    TINY_GPT2,
    TINY_LLAMA,
    TinyModelSpec,
    build_config,
    init_model,
)
from mibspec_dev.training.recipe import (
    build_tokenizer,
    default_symbol_lists,
    structured_embeddings,
)
from mibspec_dev.training.tokenizer import (
    SPECIAL_TOKENS,
    build_word_tokenizer,
    save_tokenizer_files,
    tokenize_function,
)

pytestmark = pytest.mark.recompute

REPO = Path(__file__).resolve().parents[3]
MICRO_GPT2 = TinyModelSpec("micro-gpt2", "gpt2", d_model=16, n_layers=1, n_heads=2, n_kv_heads=2, d_mlp=32)
MICRO_LLAMA = TinyModelSpec("micro-llama", "llama", d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_mlp=32)


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return build_tokenizer()


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_tokenizer_is_deterministic_and_covers_every_word(tokenizer: Tokenizer) -> None:
    again = build_word_tokenizer(vocabulary_texts())
    assert tokenizer.to_str() == again.to_str()
    vocab = tokenizer.get_vocab()
    assert [vocab[t] for t in SPECIAL_TOKENS] == [0, 1, 2]
    tokenize = tokenize_function(tokenizer)
    for task in TASKS:
        for split in SPLITS:
            for row in generate(task, split, 40, seed=9).rows:
                for obj in (row["base"], *row["counterfactuals"].values()):
                    assert vocab["<unk>"] not in tokenize(obj["prompt"])
                    if obj["answer"] is not None:
                        assert len(tokenize(obj["answer"])) == 1


def test_tokenizer_rules(tokenizer: Tokenizer) -> None:
    tokenize = tokenize_function(tokenizer)
    inverse = {i: t for t, i in tokenizer.get_vocab().items()}
    words = [inverse[i] for i in tokenize("Q: What is 27+64? A:\nA. gray")]
    assert words == ["Q", ":", "What", "is", "27", "+", "64", "?", "A", ":", "A", ".", "gray"]
    assert tokenize(" Mary") == tokenize("Mary")
    with pytest.raises(ValueError, match="texts"):
        build_word_tokenizer([1])  # type: ignore[list-item]


def test_saved_tokenizer_loads_offline_with_autotokenizer(tokenizer: Tokenizer, tmp_path: Path) -> None:
    save_tokenizer_files(tokenizer, tmp_path, 64)
    auto = AutoTokenizer.from_pretrained(tmp_path, trust_remote_code=False)
    text = "When Mary and John went to the store, John gave a book to"
    assert auto(text, add_special_tokens=False)["input_ids"] == tokenize_function(tokenizer)(text)
    assert auto(text)["input_ids"] == auto(text, add_special_tokens=False)["input_ids"]  # nothing added
    assert (auto.pad_token_id, auto.unk_token_id, auto.eos_token_id) == (0, 1, 2)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["padding_side"] == "right"


@pytest.mark.parametrize("spec", [TINY_GPT2, TINY_LLAMA])
def test_init_is_seeded_and_leaves_global_rng_alone(spec: TinyModelSpec) -> None:
    before = torch.random.get_rng_state()
    a, b, c = (_state(init_model(spec, 50, seed)) for seed in (3, 3, 4))
    assert torch.equal(before, torch.random.get_rng_state())
    assert _same(a, b)
    assert not _same(a, c)


def test_config_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="spec"):
        build_config(replace(MICRO_GPT2, d_model=15), 50)
    with pytest.raises(ValueError, match="spec"):
        build_config(replace(MICRO_LLAMA, n_kv_heads=3), 50)
    with pytest.raises(ValueError, match="vocab_size"):
        build_config(MICRO_GPT2, 3)


def _micro_data(tokenizer: Tokenizer) -> EncodedExamples:
    rows = generate("mcqa", "train", 20, seed=0).rows + generate("ioi", "train", 20, seed=0).rows
    examples = [Example(r["base"]["prompt"], r["base"]["answer"], "x") for r in rows]
    return encode_examples(examples, tokenize_function(tokenizer))


@pytest.mark.parametrize("spec", [MICRO_GPT2, MICRO_LLAMA])
def test_training_is_bitwise_reproducible_and_freezes_rows(spec: TinyModelSpec, tokenizer: Tokenizer) -> None:
    data = _micro_data(tokenizer)
    config = TrainingConfig(steps=12, batch_size=8, warmup_steps=2, prompt_loss_weight=1.0, log_every=5)
    frozen = [tokenizer.get_vocab()[w] for w in ("Mary", "banana", "store")]
    states, histories = [], []
    for seed in (0, 0, 1):
        model = init_model(spec, tokenizer.get_vocab_size(), 0)
        start = _state(model)
        histories.append(train_model(model, data, replace(config, seed=seed), frozen_token_ids=frozen))
        states.append(_state(model))
        key = next(k for k in start if k.endswith(("wte.weight", "embed_tokens.weight")))
        assert torch.equal(start[key][frozen], states[-1][key][frozen])
        assert not torch.equal(start[key], states[-1][key])
    assert _same(states[0], states[1])
    assert histories[0] == histories[1]
    assert not _same(states[0], states[2])  # the data order depends on the seed
    assert [h["step"] for h in histories[0]] == [5.0, 10.0, 12.0]
    assert torch.are_deterministic_algorithms_enabled() is False


def test_deterministic_context_restores_state() -> None:
    threads = torch.get_num_threads()
    with deterministic_torch(1):
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.get_num_threads() == 1
    assert not torch.are_deterministic_algorithms_enabled()
    assert torch.get_num_threads() == threads
    with pytest.raises(ValueError, match="threads"), deterministic_torch(0):
        pass


def test_batches_cover_each_example_once_per_epoch() -> None:
    lengths = torch.tensor([5, 3, 9, 9, 1, 2, 7, 3, 3, 8] * 30)
    batches = _batches(lengths, 10, torch.Generator().manual_seed(0))
    epoch = torch.cat([next(batches) for _ in range(30)])
    assert sorted(epoch.tolist()) == list(range(300))


def test_encode_rejects_multi_token_answers(tokenizer: Tokenizer) -> None:
    with pytest.raises(ValueError, match="one-token"):
        encode_examples([Example("When Mary", " and John", "x")], tokenize_function(tokenizer))
    with pytest.raises(ValueError, match="examples"):
        encode_examples([], tokenize_function(tokenizer))


@pytest.mark.slow
def test_last_position_logits_read_the_last_real_token(tokenizer: Tokenizer) -> None:
    model = init_model(MICRO_GPT2, tokenizer.get_vocab_size(), 0)
    data = _micro_data(tokenizer)
    batched = last_position_logits(model, data, batch_size=7)
    for i in (0, 5, 39):
        ids = data.input_ids[i, : int(data.lengths[i])][None]
        with torch.no_grad():
            single = model(input_ids=ids).logits[0, -1]
        torch.testing.assert_close(batched[i], single, rtol=1e-5, atol=1e-5)


def test_structured_embeddings(tokenizer: Tokenizer) -> None:
    vocab = tokenizer.get_vocab()
    initial = torch.zeros(len(vocab), 32)
    init = structured_embeddings(initial, vocab, seed=0)
    words = lexicon()
    expected = {vocab[w] for kind, ws in words.items() if kind != "colors" for w in ws}
    assert set(init.frozen_ids) == expected
    assert init.frozen_ids == sorted(init.frozen_ids)
    assert torch.equal(initial, torch.zeros(len(vocab), 32))
    weights = init.weights
    # Numbers decompose into digit vectors: 27 + 64 and 24 + 67 have equal embedding sums.
    e = {n: weights[vocab[str(n)]] for n in (27, 64, 24, 67)}
    torch.testing.assert_close(e[27] + e[64], e[24] + e[67])
    assert torch.equal(weights[vocab["red"]], initial[vocab["red"]])
    assert torch.equal(weights, structured_embeddings(initial, vocab, seed=0).weights)
    # Lexicon words share one vector per list: names are closer to names than to places.
    names = torch.stack([weights[vocab[w]] for w in words["names"][:50]])
    places = torch.stack([weights[vocab[w]] for w in words["places"][:50]])
    assert float((names[:25] * names[25:]).sum(1).mean()) > float((names * places).sum(1).mean()) + 0.5
    # A redraw keeps each row's list vector and replaces the individual part of names only.
    redraw = init.resampler()(torch.Generator().manual_seed(5))
    frozen = weights[init.frozen_ids]
    assert redraw.shape == frozen.shape
    name_rows = torch.tensor([i in {vocab[w] for w in words["names"]} for i in init.frozen_ids])
    assert torch.equal(init.resampled, name_rows)
    assert torch.equal(redraw[~name_rows], frozen[~name_rows])
    assert not torch.equal(redraw[name_rows], frozen[name_rows])
    individual_old, individual_new = frozen - init.shared, redraw - init.shared
    assert abs(float(individual_new.norm(dim=1).mean()) - float(individual_old.norm(dim=1).mean())) < 0.1
    with_letters = structured_embeddings(
        initial, vocab, seed=0, symbol_lists=default_symbol_lists(letters=True)
    )
    assert vocab["A"] in with_letters.frozen_ids
    assert vocab["A"] not in init.frozen_ids


def test_resampling_restores_the_initial_rows(tokenizer: Tokenizer) -> None:
    data = _micro_data(tokenizer)
    model = init_model(MICRO_GPT2, tokenizer.get_vocab_size(), 0)
    start = _state(model)
    frozen = [tokenizer.get_vocab()[w] for w in ("Mary", "John")]
    calls: list[int] = []

    def resample(generator: torch.Generator) -> torch.Tensor:
        calls.append(1)
        return torch.randn(2, 16, generator=generator)

    config = TrainingConfig(steps=6, batch_size=8, warmup_steps=1)
    train_model(model, data, config, frozen_token_ids=frozen, resample_frozen=resample)
    assert len(calls) == 6
    key = "transformer.wte.weight"
    assert torch.equal(model.state_dict()[key][frozen], start[key][frozen])
    with pytest.raises(ValueError, match="resample_frozen"):
        train_model(
            model, data, config, frozen_token_ids=frozen, resample_frozen=lambda g: torch.zeros(3, 16)
        )

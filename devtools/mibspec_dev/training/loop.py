"""A plain, deterministic training loop for next-token answers, and its evaluation helpers.

Every example is a prompt and a one-token answer; the loss is the cross-entropy of the
answer at the prompt's last position (nothing else is predicted). Data order comes from
a local ``torch.Generator``; deterministic algorithms and a fixed thread count are
switched on for the duration of the loop and restored afterwards.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from transformers import PreTrainedModel

from .tokenizer import PAD_TOKEN, SPECIAL_TOKENS

__all__ = [
    "EncodedExamples",
    "Example",
    "TrainingConfig",
    "deterministic_torch",
    "encode_examples",
    "last_position_logits",
    "token_embedding",
    "train_model",
]

_PAD_ID = SPECIAL_TOKENS.index(PAD_TOKEN)


@dataclass(frozen=True)
class Example:
    """One training or evaluation item: a prompt, its one-token answer, the task name."""

    prompt: str
    answer: str
    task: str


@dataclass(frozen=True)
class EncodedExamples:
    """Right-padded token ids of many prompts.

    Attributes:
        input_ids: ``(n, max_len)`` int64, padded with the pad id.
        lengths: ``(n,)`` prompt lengths in tokens.
        targets: ``(n,)`` answer token ids.
        tasks: task name of each example.
    """

    input_ids: torch.Tensor
    lengths: torch.Tensor
    targets: torch.Tensor
    tasks: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.lengths.shape[0])


@dataclass(frozen=True)
class TrainingConfig:
    """Hyper-parameters of :func:`train_model` (AdamW, linear warm-up, cosine decay)."""

    steps: int = 3000
    batch_size: int = 64
    learning_rate: float = 3e-3
    warmup_steps: int = 100
    min_lr_ratio: float = 0.05
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    seed: int = 0
    threads: int = 1
    log_every: int = 250
    prompt_loss_weight: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@contextlib.contextmanager
def deterministic_torch(threads: int) -> Iterator[None]:
    """Deterministic algorithms and ``threads`` intra-op threads inside the block only."""
    if threads < 1:
        raise ValueError(f"threads: expected an integer >= 1, got {threads!r}")
    previous_flag = torch.are_deterministic_algorithms_enabled()
    previous_threads = torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous_flag)
        torch.set_num_threads(previous_threads)


def encode_examples(examples: Sequence[Example], tokenize: Callable[[str], Sequence[int]]) -> EncodedExamples:
    """Tokenize prompts (right-padded) and one-token answers.

    Raises:
        ValueError: when an answer is not exactly one token.
    """
    if not examples:
        raise ValueError("examples: expected at least one example, got none")
    prompts = [list(tokenize(ex.prompt)) for ex in examples]
    targets = []
    for ex in examples:
        ids = list(tokenize(ex.answer))
        if len(ids) != 1:
            raise ValueError(f"examples: expected one-token answers, got {ex.answer!r} -> {ids}")
        targets.append(ids[0])
    width = max(len(p) for p in prompts)
    input_ids = torch.full((len(prompts), width), _PAD_ID, dtype=torch.long)
    for i, ids in enumerate(prompts):
        input_ids[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return EncodedExamples(
        input_ids=input_ids,
        lengths=torch.tensor([len(p) for p in prompts], dtype=torch.long),
        targets=torch.tensor(targets, dtype=torch.long),
        tasks=tuple(ex.task for ex in examples),
    )


def token_embedding(model: PreTrainedModel) -> torch.nn.Parameter:
    """The (tied) token embedding matrix of a causal LM."""
    weight = model.get_input_embeddings().weight
    if not isinstance(weight, torch.nn.Parameter):
        raise ValueError(f"model: expected a token embedding parameter, got {type(weight).__name__}")
    return weight


def _batch_logits(model: PreTrainedModel, input_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    width = int(lengths.max())
    ids = input_ids[:, :width]
    mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    logits = model(input_ids=ids, attention_mask=mask).logits
    return logits[torch.arange(ids.shape[0]), lengths - 1]


def _loss(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    lengths: torch.Tensor,
    targets: torch.Tensor,
    prompt_weight: float,
) -> torch.Tensor:
    """Answer cross-entropy, plus ``prompt_weight`` times the next-token loss inside the prompts."""
    width = int(lengths.max())
    ids = input_ids[:, :width]
    positions = torch.arange(width)[None, :]
    mask = (positions < lengths[:, None]).long()
    logits = model(input_ids=ids, attention_mask=mask).logits
    rows = torch.arange(ids.shape[0])
    loss = torch.nn.functional.cross_entropy(logits[rows, lengths - 1], targets)
    if prompt_weight > 0:
        inner = (positions[:, :-1] < (lengths[:, None] - 1)).reshape(-1)
        flat_logits = logits[:, :-1].reshape(-1, logits.shape[-1])[inner]
        flat_targets = ids[:, 1:].reshape(-1)[inner]
        loss = loss + prompt_weight * torch.nn.functional.cross_entropy(flat_logits, flat_targets)
    return loss


def last_position_logits(
    model: PreTrainedModel, data: EncodedExamples, batch_size: int = 256
) -> torch.Tensor:
    """Logits at each prompt's last token, ``(n, vocab)`` float32, model in eval mode."""
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(data), batch_size):
            sl = slice(start, start + batch_size)
            out.append(_batch_logits(model, data.input_ids[sl], data.lengths[sl]).float())
    return torch.cat(out)


def _learning_rate(step: int, config: TrainingConfig) -> float:
    if step < config.warmup_steps:
        return config.learning_rate * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return config.learning_rate * (config.min_lr_ratio + (1.0 - config.min_lr_ratio) * cosine)


def _batches(lengths: torch.Tensor, batch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Endless batches: each epoch a fresh permutation, cut into chunks of 32 batches;
    inside a chunk, examples are sorted by length (stable) before batching, so a batch
    pads little; the batch order is then shuffled. Every draw uses ``generator``."""
    n = int(lengths.shape[0])
    chunk = batch_size * 32
    while True:
        order = torch.randperm(n, generator=generator)
        batches: list[torch.Tensor] = []
        for start in range(0, n, chunk):
            part = order[start : start + chunk]
            part = part[torch.argsort(lengths[part], stable=True)]
            batches.extend(part[b : b + batch_size] for b in range(0, len(part) - batch_size + 1, batch_size))
        for j in torch.randperm(len(batches), generator=generator).tolist():
            yield batches[j]


def train_model(
    model: PreTrainedModel,
    data: EncodedExamples,
    config: TrainingConfig,
    log: Callable[[str], None] | None = None,
    frozen_token_ids: Sequence[int] = (),
    resample_frozen: Callable[[torch.Generator], torch.Tensor] | None = None,
) -> list[dict[str, float]]:
    """Train ``model`` in place on last-position answer prediction.

    Biases, norms and embeddings get no weight decay. The embedding rows of
    ``frozen_token_ids`` receive a zero gradient (input and tied output side alike), so
    with Adam and no decay they keep their initial values.

    With ``resample_frozen``, the frozen rows are redrawn before every step: the callable
    receives a generator seeded with ``config.seed + 1`` and returns the new
    ``(len(frozen_token_ids), d_model)`` rows. After the last step the initial rows are
    put back, so the returned model holds the rows it started with.

    Returns:
        The loss history: one ``{"step", "loss", "lr"}`` entry per ``log_every`` steps
        (mean loss over those steps).
    """
    if config.batch_size > len(data):
        raise ValueError(
            f"config.batch_size: expected at most {len(data)} (the data size), got {config.batch_size}"
        )
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for name, param in model.named_parameters():
        (
            decay
            if param.ndim >= 2 and "emb" not in name and "wte" not in name and "wpe" not in name
            else no_decay
        ).append(param)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.learning_rate,
        betas=(0.9, 0.98),
    )
    generator = torch.Generator().manual_seed(config.seed)
    embedding = token_embedding(model)
    frozen = torch.zeros(embedding.shape[0], 1, dtype=torch.bool)
    if len(frozen_token_ids):
        ids = torch.tensor(list(frozen_token_ids), dtype=torch.long)
        if int(ids.min()) < 0 or int(ids.max()) >= embedding.shape[0]:
            raise ValueError(
                f"frozen_token_ids: expected ids in [0, {embedding.shape[0]}), got {ids.min()}..{ids.max()}"
            )
        frozen[ids] = True
    hook = embedding.register_hook(lambda grad: grad.masked_fill(frozen, 0.0))
    frozen_ids = torch.tensor(list(frozen_token_ids), dtype=torch.long)
    initial_rows = embedding.detach()[frozen_ids].clone()
    redraw: Callable[[], None] | None = None
    if resample_frozen is not None:
        rows_generator = torch.Generator().manual_seed(config.seed + 1)

        def redraw() -> None:
            rows = resample_frozen(rows_generator)
            if rows.shape != initial_rows.shape:
                raise ValueError(
                    f"resample_frozen: expected rows of shape {tuple(initial_rows.shape)}, "
                    f"got {tuple(rows.shape)}"
                )
            with torch.no_grad():
                embedding[frozen_ids] = rows

    try:
        return _loop(model, data, config, log, optimizer, generator, redraw)
    finally:
        hook.remove()
        with torch.no_grad():
            embedding[frozen_ids] = initial_rows


def _loop(
    model: PreTrainedModel,
    data: EncodedExamples,
    config: TrainingConfig,
    log: Callable[[str], None] | None,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    redraw: Callable[[], None] | None,
) -> list[dict[str, float]]:
    history: list[dict[str, float]] = []
    running, count = 0.0, 0
    with deterministic_torch(config.threads):
        model.train()
        batches = _batches(data.lengths, config.batch_size, generator)
        for step in range(config.steps):
            lr = _learning_rate(step, config)
            for group in optimizer.param_groups:
                group["lr"] = lr
            index = next(batches)
            if redraw is not None:
                redraw()
            loss = _loss(
                model,
                data.input_ids[index],
                data.lengths[index],
                data.targets[index],
                config.prompt_loss_weight,
            )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            running += float(loss.detach())
            count += 1
            if (step + 1) % config.log_every == 0 or step + 1 == config.steps:
                entry = {"step": float(step + 1), "loss": running / count, "lr": lr}
                history.append(entry)
                if log is not None:
                    log(f"  step {step + 1:>6}/{config.steps}  loss {entry['loss']:.4f}  lr {lr:.2e}")
                running, count = 0.0, 0
        model.eval()
    return history

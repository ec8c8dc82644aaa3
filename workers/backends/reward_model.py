"""Turn scoring with a reward model: a transformers checkpoint with a sequence (or token)
classification head, from a local path, on CPU or GPU, batched. Each assistant step is
scored with the conversation up to and including it; the score is the head's single logit
(num_labels == 1) or the probability of its last label ("good") otherwise. No Django."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workers.backends.base import BackendError

MAX_LENGTH = 4096  # tokens kept per scored prefix: the end of the conversation is kept


class RewardModelScorer:
    kind = "reward_model"

    def __init__(self, model: str, device: str = "auto", batch_size: int = 8) -> None:
        try:
            import torch
            from transformers import AutoConfig, AutoTokenizer
        except ImportError as error:
            raise BackendError(f"reward models need torch and transformers: {error}") from None
        self.torch = torch
        self.device = (
            ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        )
        self.batch_size = batch_size
        config = AutoConfig.from_pretrained(model, local_files_only=True)
        architectures = config.architectures or []
        if any(a.endswith("ForTokenClassification") for a in architectures):
            from transformers import AutoModelForTokenClassification as Auto

            self.per_token = True
        else:
            from transformers import AutoModelForSequenceClassification as Auto

            self.per_token = False
        self.tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
        self.tokenizer.truncation_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"  # the last position is the scored one
        self.model = Auto.from_pretrained(model, local_files_only=True).to(self.device).eval()
        if self.model.config.pad_token_id is None:
            self.model.config.pad_token_id = self.tokenizer.pad_token_id

    def render(self, messages: list[dict[str, Any]]) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, tokenize=False)
        return "\n".join(f"{m['role']}: {m.get('content') or ''}" for m in messages)

    def score(self, conversations: Sequence[list[dict[str, Any]]]) -> list[float]:
        """One score per conversation (the last message is the scored step), in order."""
        scores: list[float] = []
        for start in range(0, len(conversations), self.batch_size):
            texts = [self.render(c) for c in conversations[start : start + self.batch_size]]
            encoded = self.tokenizer(
                texts, return_tensors="pt", padding=True, truncation=True, max_length=MAX_LENGTH
            ).to(self.device)
            with self.torch.no_grad():
                logits = self.model(**encoded).logits.float()
            if self.per_token:
                logits = logits[:, -1, :]  # left padding: the last token is the step's end
            if logits.shape[-1] == 1:
                values = logits[:, 0]
            else:
                values = logits.softmax(-1)[:, -1]
            scores.extend(round(float(v), 6) for v in values.cpu())
        return scores

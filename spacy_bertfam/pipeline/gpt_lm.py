"""The `gpt_lm` component: GPT features for listeners, LM scores, generation, auxiliary LM loss.

Follows the shared encoder contract (see `pipeline/encoder.py`); a causal model's
token vector is its last piece by default, and long documents use the causal window
rule. On top of that:

- `lm_scores = true` sets `doc._.perplexity` and `token._.logprob` (natural log,
  the sum over the token's pieces; a token sharing a neighbour's piece gets 0.0),
  read from the features pass's top layer with the LM head, so the decoder runs once;
- `generate(...)` samples continuations, streaming text increments;
- `lm_weight` (λ) adds λ × the LM loss on each training batch's own text to the
  task losses, as GPT-1 fine-tunes (Radford et al. 2018, §3.2: λ = 0.5).
"""
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from spacy.language import Language
from spacy.tokens import Doc, Token
from spacy.vocab import Vocab
from thinc.api import Model, xp2torch

from ..encoders import EncodedBatch, piece_layout, torch_encoder
from ..models.gpt import check_fits, check_sampling, first_piece_logprobs, generate, next_piece_logprobs
from ..tokenization import PieceTokenizer
from ..tokenization.bpe import END_OF_TEXT
from ..tokenization.words import first_segment_end, token_words
from .encoder import DEFAULT_COMPONENT_CONFIG, EncoderComponent

# GPT-2 small's sizes are the architecture's defaults (GptConfig's).
DEFAULT_GPT_MODEL = {"@architectures": "spacy-bertfam.GptDecoder.v1"}


def _ensure_lm_extensions() -> None:
    if not Doc.has_extension("perplexity"):
        Doc.set_extension("perplexity", default=None)
    if not Doc.has_extension("token_logprobs"):
        Doc.set_extension("token_logprobs", default=None)
    if not Token.has_extension("logprob"):
        Token.set_extension("logprob", getter=_token_logprob)


def _token_logprob(token: Token) -> Optional[float]:
    scores = token.doc._.token_logprobs
    return None if scores is None else float(scores[token.i])


class GptLmComponent(EncoderComponent):
    """A GPT decoder component. See the module docstring; the shared settings are
    EncoderComponent's.

    lm_weight (float): λ of the auxiliary LM loss during training (0 = off).
    lm_scores (bool): set doc._.perplexity and token._.logprob when annotating.
    """

    def __init__(self, vocab: Vocab, model: Model, name: str, *, lm_weight: float = 0.0,
                 lm_scores: bool = False, **settings):
        super().__init__(vocab, model, name, **settings)
        self.contract.request_lm_loss(lm_weight)
        _ensure_lm_extensions()
        self.cfg.update({"lm_weight": lm_weight, "lm_scores": lm_scores})

    def _keep_settings(self, settings: Dict) -> "GptLmComponent":
        super()._keep_settings(settings)
        self.contract.request_lm_loss(settings["lm_weight"])
        return self

    @property
    def tokenizer(self) -> PieceTokenizer:
        """The decoder's piece tokenizer (from its contract)."""
        return self.contract.tokenizer

    def _bos_id(self) -> int:
        special = self.tokenizer.special_ids()
        if not special:
            raise ValueError(f"{self.name}: the vocabulary has no special piece to start texts with")
        return special[0]

    def _layers_read_here(self) -> set:
        """doc.tensor's layer, and the top one when LM scores are read from it."""
        return super()._layers_read_here() | ({-1} if self.cfg["lm_scores"] else set())

    def set_annotations(self, docs: Sequence[Doc], encodings: EncodedBatch) -> None:
        """The shared annotations, plus the LM scores when `lm_scores` is set."""
        super().set_annotations(docs, encodings)
        if self.cfg["lm_scores"]:
            self.set_lm_scores(docs, encodings)

    def set_lm_scores(self, docs: Sequence[Doc], encodings: EncodedBatch) -> None:
        """Set doc._.perplexity and the per-token log-probabilities from the features pass.

        Piece i + 1 is scored from the top layer at piece i, in the window where piece i
        has the most left context (the causal window rule), so the decoder does not run
        again; the first piece is scored after the beginning-of-text piece. A sentence
        pair's segments were encoded as two texts, so each is scored as its own text. A
        token sharing a neighbour's piece gets 0.0.
        """
        decoder = torch_encoder(self.model)
        top = self.contract.n_layers - 1
        pieces = self.tokenizer.encode_word_pieces([token_words(d, piece_layout(self.model).words) for d in docs])
        hidden_rows, targets, firsts, where = [], [], [], []  # where: (doc, piece index of each first)
        n_pieces = []
        for k, (doc, (doc_ids, lengths)) in enumerate(zip(docs, pieces)):
            row = 0  # the encoder's row of the segment's first piece
            word_starts = np.concatenate([[0], np.cumsum(lengths)])  # each word's first piece
            n_pieces.append(int(word_starts[-1]))
            piece = 0
            for begin, end in _segments(doc):
                ids = doc_ids[word_starts[begin]:word_starts[end]].tolist()
                if ids:
                    firsts.append(ids[0])
                    where.append((k, piece))
                    hidden_rows.append(encodings[k].layers[top][row:row + len(ids) - 1])
                    targets += ids[1:]
                piece += len(ids)
                if end > begin:  # tokens without any piece were encoded as one [UNK]
                    row += max(len(ids), 1)
            if row != encodings[k].layers[top].shape[0]:
                raise ValueError(f"{self.name}: the LM scores found {row} pieces in a Doc the "
                                 f"encoder gave {encodings[k].layers[top].shape[0]} rows")
        per_doc = [np.zeros(n, dtype=np.float32) for n in n_pieces]
        if firsts:
            device = next(decoder.parameters()).device
            hidden = torch.cat([xp2torch(h, device=device) for h in hidden_rows])
            following = next_piece_logprobs(decoder, hidden, torch.as_tensor(targets, device=device)).cpu().numpy()
            first = first_piece_logprobs(decoder, self._bos_id())[firsts].cpu().numpy()
            used = 0
            for j, (k, piece) in enumerate(where):
                n_next = hidden_rows[j].shape[0]
                per_doc[k][piece] = first[j]
                per_doc[k][piece + 1:piece + 1 + n_next] = following[used:used + n_next]
                used += n_next
        for doc, (_, lengths), scores in zip(docs, pieces, per_doc):
            running = np.concatenate([[0.0], np.cumsum(scores, dtype=np.float64)])
            ends = np.cumsum(lengths)
            doc._.token_logprobs = (running[ends] - running[ends - lengths]).astype(np.float32)
            doc._.perplexity = float(np.exp(-scores.mean())) if len(scores) else None

    def generate(
        self,
        prompts: Union[str, Sequence[str]],
        max_new_tokens: int = 50,
        *,
        temperature: float = 0.0,
        top_k: Optional[int] = None,
        top_p: Optional[float] = None,
        seed: Optional[int] = None,
        stop_at_end_of_text: bool = True,
    ) -> Iterator[Union[str, List[str]]]:
        """Continue one prompt (yields text increments) or several (yields lists of them).

        temperature 0 is greedy; otherwise sampling from softmax(logits / temperature)
        restricted to `top_k` pieces and/or the nucleus `top_p`; `seed` makes it
        reproducible. Uses the key/value cache; prompts are batched.
        stop_at_end_of_text: a continuation ends at `<|endoftext|>` (GPT-2's end of a
            document; not part of the text), as Hugging Face's `generate` ends at its EOS:
            a finished prompt then gets "" while others go on, and generation ends when
            all are finished. False continues for `max_new_tokens` pieces (a new document).
        """
        check_sampling(max_new_tokens, temperature, top_k, top_p)
        single = isinstance(prompts, str)
        texts = [prompts] if single else list(prompts)
        if not texts:
            raise ValueError("generate() needs at least one prompt")
        decoder = torch_encoder(self.model)
        ids = [self.tokenizer.encode(t).ids.tolist() or [self._bos_id()] for t in texts]
        longest = max(len(i) for i in ids)
        check_fits(decoder, longest, max_new_tokens)
        device = next(decoder.parameters()).device
        batch = torch.zeros(len(ids), longest, dtype=torch.long, device=device)
        mask = torch.zeros_like(batch)
        for i, row in enumerate(ids):  # left padding keeps every prompt's end aligned
            batch[i, longest - len(row):] = torch.tensor(row, device=device)
            mask[i, longest - len(row):] = 1
        generator = None
        if seed is not None:
            generator = torch.Generator(device=device).manual_seed(seed)
        stop_id = self.tokenizer.tokenizer.token_to_id(END_OF_TEXT) if stop_at_end_of_text else None
        new: List[List[int]] = [[] for _ in texts]
        shown = [""] * len(texts)
        done = [False] * len(texts)
        steps = generate(decoder, batch, mask, max_new_tokens=max_new_tokens, temperature=temperature,
                         top_k=top_k, top_p=top_p, generator=generator)
        for k, step in enumerate(steps):
            last = k == max_new_tokens - 1
            increments = []
            for i, piece in enumerate(step.tolist()):
                if done[i]:
                    increments.append("")
                    continue
                done[i] = piece == stop_id
                if not done[i]:
                    new[i].append(piece)
                text = self.tokenizer.decode(new[i])
                # Hold back a partial UTF-8 character until its last byte arrives.
                ready = text[: len(text) - 1] if text.endswith("\ufffd") and not (last or done[i]) else text
                increments.append(ready[len(shown[i]):])
                shown[i] = ready
            yield increments[0] if single else increments
            if all(done):
                return


@Language.factory(
    "gpt_lm",
    default_config={"model": DEFAULT_GPT_MODEL, **DEFAULT_COMPONENT_CONFIG, "lm_weight": 0.0, "lm_scores": False},
)
def make_gpt_lm(
    nlp: Language,
    name: str,
    model: Model,
    set_doc_tensor: bool,
    tensor_layer: int,
    tensor_pooling: Optional[str],
    user_hooks: bool,
    store_all_layers: bool,
    drop_outputs: bool,
    sort_batches: int,
    precision: str,
    torch_compile: bool,
    trim_memory: bool,
    lm_weight: float,
    lm_scores: bool,
) -> GptLmComponent:
    """A GPT decoder component; see `GptLmComponent` and `EncoderComponent`."""
    return GptLmComponent(
        nlp.vocab, model, name, lm_weight=lm_weight, lm_scores=lm_scores,
        set_doc_tensor=set_doc_tensor, tensor_layer=tensor_layer, tensor_pooling=tensor_pooling,
        user_hooks=user_hooks, store_all_layers=store_all_layers, drop_outputs=drop_outputs,
        sort_batches=sort_batches, precision=precision, torch_compile=torch_compile,
        trim_memory=trim_memory, nlp=nlp,
    )


def _segments(doc: Doc) -> List[Tuple[int, int]]:
    """Token ranges encoded as texts of their own: a sentence pair's two segments, else the Doc."""
    split = first_segment_end(doc)
    return [(0, split), (split, len(doc))] if split else [(0, len(doc))]

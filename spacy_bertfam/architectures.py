"""Registered thinc architectures (`spacy-bertfam.<Name>.v1`).

A registered signature never changes: a new behaviour gets a new version. The
structural defaults are the family config dataclasses' (one place for each fact).
"""
from typing import List

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model

from .encoders import EncodedBatch, PieceLayout, build_elmo_encoder, build_piece_encoder
from .errors import as_config_error
from .models.bert import BertConfig, BertEncoder
from .models.elmo import ElmoBiLM, ElmoConfig
from .models.gpt import GptConfig, GptDecoder

_BERT, _GPT, _ELMO = BertConfig(), GptConfig(), ElmoConfig()


@registry.architectures("spacy-bertfam.BertEncoder.v1")
def bert_encoder_v1(
    n_pieces: int = _BERT.n_pieces,
    hidden_width: int = _BERT.hidden_width,
    n_layers: int = _BERT.n_layers,
    n_heads: int = _BERT.n_heads,
    intermediate_width: int = _BERT.intermediate_width,
    n_positions: int = _BERT.n_positions,
    n_types: int = _BERT.n_types,
    hidden_dropout: float = _BERT.hidden_dropout,
    attention_dropout: float = _BERT.attention_dropout,
    layer_norm_eps: float = _BERT.layer_norm_eps,
    activation: str = _BERT.activation,
    padding_id: int = _BERT.padding_id,
    window: int = 128,
    stride: int = 96,
    batch_pieces: int = 4096,
) -> Model[List[Doc], EncodedBatch]:
    """A BERT encoder over Docs: WordPiece pieces, windows, every layer's output.

    The structural settings (n_pieces .. activation) must match the checkpoint that
    the encoder_loader loads at initialize; a mismatch is reported field by field.
    Defaults are BERT-base; all-MiniLM-L6-v2 is hidden_width 384, n_layers 6,
    intermediate_width 1536.

    n_pieces (int): vocabulary size.
    hidden_width (int): width of each layer's output.
    n_layers (int): transformer blocks; the model exposes n_layers + 1 outputs.
    n_heads (int): attention heads.
    intermediate_width (int): feed-forward inner width.
    n_positions (int): learned positions, the longest possible window.
    n_types (int): segment types.
    hidden_dropout (float): dropout on embeddings and sublayer outputs (0.1).
    attention_dropout (float): dropout on attention probabilities (0.1).
    layer_norm_eps (float): LayerNorm epsilon (1e-12).
    activation (str): "gelu" (exact) for BERT.
    padding_id (int): id of [PAD].
    window (int): pieces per window, [CLS] and [SEP] included; at most n_positions.
        Shorter windows are faster; 128 covers most sentences in one window.
    stride (int): pieces between window starts; overlapping positions are averaged.
    batch_pieces (int): most padded positions per encoder call; windows are run in
        chunks of similar length, so larger batches waste less on padding.
    """
    with as_config_error("spacy-bertfam.BertEncoder.v1"):
        config = BertConfig(
            n_pieces=n_pieces,
            hidden_width=hidden_width,
            n_layers=n_layers,
            n_heads=n_heads,
            intermediate_width=intermediate_width,
            n_positions=n_positions,
            n_types=n_types,
            hidden_dropout=hidden_dropout,
            attention_dropout=attention_dropout,
            layer_norm_eps=layer_norm_eps,
            activation=activation,
            padding_id=padding_id,
        )
        layout = PieceLayout(window=window, stride=stride, combine="mean", prefix=("[CLS]",), suffix=("[SEP]",),
                             separator=("[SEP]",), unknown="[UNK]", padding_id=padding_id)
        return build_piece_encoder(BertEncoder(config), layout, family="bert", n_layers=n_layers + 1,
                                   width=hidden_width, default_pooling="mean", batch_pieces=batch_pieces)


@registry.architectures("spacy-bertfam.GptDecoder.v1")
def gpt_decoder_v1(
    n_pieces: int = _GPT.n_pieces,
    hidden_width: int = _GPT.hidden_width,
    n_layers: int = _GPT.n_layers,
    n_heads: int = _GPT.n_heads,
    intermediate_width: int = _GPT.intermediate_width,
    n_positions: int = _GPT.n_positions,
    embedding_dropout: float = _GPT.embedding_dropout,
    residual_dropout: float = _GPT.residual_dropout,
    attention_dropout: float = _GPT.attention_dropout,
    layer_norm_eps: float = _GPT.layer_norm_eps,
    activation: str = _GPT.activation,
    pre_norm: bool = _GPT.pre_norm,
    unknown_piece: str = "<|endoftext|>",
    window: int = 256,
    stride: int = 192,
    batch_pieces: int = 4096,
) -> Model[List[Doc], EncodedBatch]:
    """A GPT decoder over Docs: BPE pieces, causal windows, every layer's output.

    Defaults are GPT-2 small; GPT-1 is pre_norm = false, n_pieces 40478,
    n_positions 512, unknown_piece "<unk>". The structural settings must match the
    checkpoint that the encoder_loader loads.

    n_pieces .. activation (see GptConfig): sizes, dropout and activation.
    pre_norm (bool): GPT-2's pre-LN blocks and final LayerNorm (true) or GPT-1 (false).
    unknown_piece (str): the piece standing in for a doc whose tokens yield none.
    window (int): pieces per window, at most n_positions.
    stride (int): pieces between window starts; each position keeps the output of
        the window where it has the most left context.
    batch_pieces (int): most padded positions per decoder call.
    """
    with as_config_error("spacy-bertfam.GptDecoder.v1"):
        config = GptConfig(
            n_pieces=n_pieces,
            hidden_width=hidden_width,
            n_layers=n_layers,
            n_heads=n_heads,
            intermediate_width=intermediate_width,
            n_positions=n_positions,
            embedding_dropout=embedding_dropout,
            residual_dropout=residual_dropout,
            attention_dropout=attention_dropout,
            layer_norm_eps=layer_norm_eps,
            activation=activation,
            pre_norm=pre_norm,
        )
        layout = PieceLayout(window=window, stride=stride, combine="most_left_context", prefix=(), suffix=(),
                             separator=None, unknown=unknown_piece, padding_id=0, words="space_before")
        return build_piece_encoder(GptDecoder(config), layout, family="gpt", n_layers=n_layers + 1,
                                   width=hidden_width, default_pooling="last", batch_pieces=batch_pieces)


@registry.architectures("spacy-bertfam.ElmoBiLM.v1")
def elmo_bilm_v1(
    n_characters: int = _ELMO.n_characters,
    char_width: int = _ELMO.char_width,
    max_chars: int = _ELMO.max_chars,
    filters: List[List[int]] = [list(f) for f in _ELMO.filters],
    n_highway: int = _ELMO.n_highway,
    activation: str = _ELMO.activation,
    cell_width: int = _ELMO.cell_width,
    projection_width: int = _ELMO.projection_width,
    n_layers: int = _ELMO.n_layers,
    cell_clip: float = _ELMO.cell_clip,
    projection_clip: float = _ELMO.projection_clip,
    skip_connections: bool = _ELMO.skip_connections,
    n_words: int = _ELMO.n_words,
    dropout: float = _ELMO.dropout,
) -> Model[List[Doc], EncodedBatch]:
    """ELMo's biLM over Docs: one vector per token from each of its n_layers + 1 layers.

    Defaults are a small CPU model; the original ELMo is filters [[1,32],[2,32],[3,64],
    [4,128],[5,256],[6,512],[7,1024]], n_highway 2, cell_width 4096,
    projection_width 512. The settings must match the loaded checkpoint (see
    spacy_bertfam.models.elmo.ElmoConfig for each field); layer outputs are
    2 × projection_width wide.
    """
    with as_config_error("spacy-bertfam.ElmoBiLM.v1"):
        config = ElmoConfig(
            n_characters=n_characters, char_width=char_width, max_chars=max_chars,
            filters=[tuple(f) for f in filters], n_highway=n_highway, activation=activation,
            cell_width=cell_width, projection_width=projection_width, n_layers=n_layers,
            cell_clip=cell_clip, projection_clip=projection_clip, skip_connections=skip_connections,
            n_words=n_words, dropout=dropout,
        )
        return build_elmo_encoder(ElmoBiLM(config))

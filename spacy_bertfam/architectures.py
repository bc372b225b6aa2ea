"""Registered thinc architectures (`spacy-bertfam.<Name>.v1`).

A registered signature never changes: a new behaviour gets a new version.
"""
from typing import List

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model

from .layers import build_piece_encoder
from .layers.elmo_encoder import build_elmo_encoder
from .models.bert import BertConfig, BertEncoder
from .models.elmo import ElmoBiLM, ElmoConfig
from .models.gpt import GptConfig, GptDecoder
from .types import DocEncoding


@registry.architectures("spacy-bertfam.BertEncoder.v1")
def bert_encoder_v1(
    n_pieces: int = 30522,
    hidden_width: int = 768,
    n_layers: int = 12,
    n_heads: int = 12,
    intermediate_width: int = 3072,
    n_positions: int = 512,
    n_types: int = 2,
    hidden_dropout: float = 0.1,
    attention_dropout: float = 0.1,
    layer_norm_eps: float = 1e-12,
    activation: str = "gelu",
    padding_id: int = 0,
    window: int = 128,
    stride: int = 96,
    batch_pieces: int = 4096,
) -> Model[List[Doc], List[DocEncoding]]:
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
    return build_piece_encoder(
        BertEncoder(config),
        family="bert",
        n_layers=n_layers + 1,
        width=hidden_width,
        window=window,
        stride=stride,
        combine="mean",
        prefix=["[CLS]"],
        suffix=["[SEP]"],
        separator=["[SEP]"],
        unknown="[UNK]",
        padding_id=padding_id,
        default_pooling="mean",
        batch_pieces=batch_pieces,
    )


@registry.architectures("spacy-bertfam.GptDecoder.v1")
def gpt_decoder_v1(
    n_pieces: int = 50257,
    hidden_width: int = 768,
    n_layers: int = 12,
    n_heads: int = 12,
    intermediate_width: int = 3072,
    n_positions: int = 1024,
    embedding_dropout: float = 0.1,
    residual_dropout: float = 0.1,
    attention_dropout: float = 0.1,
    layer_norm_eps: float = 1e-5,
    activation: str = "gelu_tanh",
    pre_norm: bool = True,
    unknown_piece: str = "<|endoftext|>",
    window: int = 256,
    stride: int = 192,
    batch_pieces: int = 4096,
) -> Model[List[Doc], List[DocEncoding]]:
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
    return build_piece_encoder(
        GptDecoder(config),
        family="gpt",
        n_layers=n_layers + 1,
        width=hidden_width,
        window=window,
        stride=stride,
        combine="most_left_context",
        prefix=[],
        suffix=[],
        unknown=unknown_piece,
        padding_id=0,
        default_pooling="last",
        batch_pieces=batch_pieces,
        words="space_before",
    )


@registry.architectures("spacy-bertfam.ElmoBiLM.v1")
def elmo_bilm_v1(
    n_characters: int = 262,
    char_width: int = 16,
    max_chars: int = 50,
    filters: List[List[int]] = [[1, 32], [2, 32], [3, 64], [4, 128]],
    n_highway: int = 1,
    activation: str = "relu",
    cell_width: int = 512,
    projection_width: int = 128,
    n_layers: int = 2,
    cell_clip: float = 3.0,
    projection_clip: float = 3.0,
    skip_connections: bool = True,
    n_words: int = 0,
    dropout: float = 0.1,
) -> Model[List[Doc], List[DocEncoding]]:
    """ELMo's biLM over Docs: one vector per token from each of its n_layers + 1 layers.

    Defaults are a small CPU model; the original ELMo is filters [[1,32],[2,32],[3,64],
    [4,128],[5,256],[6,512],[7,1024]], n_highway 2, cell_width 4096,
    projection_width 512. The settings must match the loaded checkpoint (see
    spacy_bertfam.models.elmo.ElmoConfig for each field); layer outputs are
    2 × projection_width wide.
    """
    config = ElmoConfig(
        n_characters=n_characters, char_width=char_width, max_chars=max_chars,
        filters=[tuple(f) for f in filters], n_highway=n_highway, activation=activation,
        cell_width=cell_width, projection_width=projection_width, n_layers=n_layers,
        cell_clip=cell_clip, projection_clip=projection_clip, skip_connections=skip_connections,
        n_words=n_words, dropout=dropout,
    )
    return build_elmo_encoder(ElmoBiLM(config))

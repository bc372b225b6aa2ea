"""Helpers used by several test modules."""
import random
from typing import List, Sequence, Tuple

import torch

from spacy_bertfam.tokenization import PieceTokenizer


def padded_batch(
    tokenizer: PieceTokenizer, texts: Sequence[str], pairs: Sequence[str] = ()
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids, attention mask, type ids), right-padded with 0."""
    encs = [
        tokenizer.encode(t, pairs[i] if i < len(pairs) else None) for i, t in enumerate(texts)
    ]
    T = max(len(e.ids) for e in encs)
    ids = torch.zeros(len(encs), T, dtype=torch.long)
    mask = torch.zeros(len(encs), T, dtype=torch.long)
    types = torch.zeros(len(encs), T, dtype=torch.long)
    for i, e in enumerate(encs):
        n = len(e.ids)
        ids[i, :n] = torch.from_numpy(e.ids)
        types[i, :n] = torch.from_numpy(e.type_ids)
        mask[i, :n] = 1
    return ids, mask, types


def max_abs_masked(ours: List[torch.Tensor], theirs: Sequence[torch.Tensor], mask: torch.Tensor) -> List[float]:
    """Per layer max |a - b| over real (unpadded) positions only."""
    keep = mask.bool()
    return [float((a[keep] - b[keep]).abs().max()) for a, b in zip(ours, theirs)]


def varied_strings() -> List[str]:
    """Hand-picked hard cases plus seeded random mixtures: >= 200 strings."""
    fixed = [
        "", " ", "Hello, world!", "HELLO WORLD", "hello   world", "naïve café", "Ångström résumé",
        "über Straße", "façade coöperate", "ﬁnancial ﬂow", "東京は日本の首都です。", "中文分词测试",
        "한국어 텍스트", "日本語とEnglishのmix", "Emoji 🙂🚀👍🏽 here", "👨‍👩‍👧‍👦 family", "¡Hola! ¿Qué tal?",
        "tab\tseparated\tvalues", "line\nbreaks\r\nhere", "control\x00chars\x07inside\x1b",
        "zero\u200bwidth\u200djoiners", "non\u00a0breaking space", "soft\u00adhyphen", "right-to-left עברית",
        "العربية نص", "Ελληνικά κείμενα", "Русский текст", "हिन्दी पाठ", "ภาษาไทย", "a" * 150,
        "supercalifragilisticexpialidocious" * 4, "x" * 99, "x" * 100, "x" * 101,
        "don't won't can't", "e.g. i.e. etc.", "$100.00 (USD) 50% #hashtag @user", "C++ & C# <html>",
        "http://example.com/path?q=1&r=2", "3.14159 2,718 1e-10", "\u2603 \u2764 \u00a9 \u00ae \u2122",
        "MiXeD CaSe WoRdS", "trailing space ", " leading space", "...!!!???", "—–-‒", "“quotes” ‘single’",
        "\ufeffBOM at start", "e\u0301 combining accent", "Ç̈ stacked marks", "ｆｕｌｌｗｉｄｔｈ",
    ]
    rng = random.Random(0)
    pool = (
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789     .,;:!?'\"()-_/\\"
        "éèêëàâäôöûüçñßøåæÉÀÖÜ漢字日本語中文한국🙂🚀🎉\t\n\x01\x0b\u200b\u00a0"
    )
    words = ["the", "bank", "river", "running", "unbelievable", "tokenization", "café", "東京", "🙂"]
    randoms = []
    for _ in range(200):
        if rng.random() < 0.5:
            randoms.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 80))))
        else:
            randoms.append(" ".join(rng.choice(words + [rng.choice(pool) * 3]) for _ in range(rng.randint(1, 25))))
    return fixed + randoms

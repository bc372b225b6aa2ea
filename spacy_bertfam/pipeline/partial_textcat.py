"""Exclusive text classification for corpora that mix tasks.

spaCy's exclusive `textcat` reads a Doc without `doc.cats` as "every class is 0": trained
beside `ner` and `span_qa` on examples annotated for one task each, it would learn to push
every class down on the NER and QA examples, and its scorer counts its prediction on such a
Doc as a false positive. `partial_textcat` is the same component and model, but a Doc
without cats is missing data: no gradient, and not scored.
"""
from typing import Any, Callable, Dict, Iterable, Optional

from spacy.language import Language
from spacy.pipeline.textcat import DEFAULT_SINGLE_TEXTCAT_MODEL, TextCategorizer
from spacy.scorer import Scorer
from spacy.training import Example
from spacy.util import registry
from thinc.api import Model


def score_annotated_cats(examples: Iterable[Example], **kwargs) -> Dict[str, Any]:
    """spaCy's exclusive-class scores over the examples whose reference has cats."""
    annotated = [eg for eg in examples if eg.reference.cats]
    scores = Scorer.score_cats(annotated, "cats", multi_label=False, **kwargs)
    if not annotated:  # nothing to score: no figure, rather than a 0 that spaCy would count
        return {key: None for key in scores}
    return scores


@registry.scorers("spacy-bertfam.textcat_scorer.v1")
def make_annotated_cats_scorer() -> Callable:
    """`spacy-bertfam.textcat_scorer.v1`: `score_annotated_cats`."""
    return score_annotated_cats


class PartialTextCategorizer(TextCategorizer):
    """spaCy's exclusive TextCategorizer where a Doc without cats is missing, not negative."""

    @property
    def support_missing_values(self) -> bool:
        """True: a label absent from `doc.cats` gets no gradient (all of them, for a Doc
        without cats). A Doc with cats lists every label (one 1.0, the rest 0.0), as
        `convert-textcat` writes them, so nothing of a labelled Doc is left out."""
        return True

    def _examples_to_truth(self, examples):
        for eg in examples:
            cats = eg.reference.cats
            if cats and set(cats) != set(self.labels):
                missing, unknown = sorted(set(self.labels) - set(cats))[:5], sorted(set(cats) - set(self.labels))[:5]
                raise ValueError(
                    f"partial_textcat: a Doc's cats do not match the component's {len(self.labels)} labels "
                    f"(missing e.g. {missing}, unknown e.g. {unknown}); give every label a value (1.0 for the "
                    f"class, 0.0 for the others), or none at all for a Doc that is not annotated for text "
                    f"classification"
                )
        return super()._examples_to_truth(examples)


@Language.factory(
    "partial_textcat",
    assigns=["doc.cats"],
    default_config={"threshold": 0.0, "model": DEFAULT_SINGLE_TEXTCAT_MODEL,
                    "scorer": {"@scorers": "spacy-bertfam.textcat_scorer.v1"}},
    default_score_weights={"cats_score": 1.0, "cats_score_desc": None, "cats_micro_p": None,
                           "cats_micro_r": None, "cats_micro_f": None, "cats_macro_p": None,
                           "cats_macro_r": None, "cats_macro_f": None, "cats_macro_auc": None,
                           "cats_f_per_type": None},
)
def make_partial_textcat(nlp: Language, name: str, model: Model, threshold: float,
                         scorer: Optional[Callable]) -> PartialTextCategorizer:
    """`partial_textcat`: spaCy's `textcat` (exclusive classes) for corpora that mix tasks."""
    return PartialTextCategorizer(nlp.vocab, model, name, threshold=threshold, scorer=scorer)


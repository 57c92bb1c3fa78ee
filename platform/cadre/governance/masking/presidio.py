"""Presidio wiring, imported only when asked for: the no-op NLP engine (nothing downloaded),
offline tldextract, and an adapter that turns Cadre recognizers into `PatternRecognizer`s.

`presidio_analyzer` is imported inside the functions: it pulls in `transformers` when that is
installed, which costs seconds that a Django process serving masking does not need to pay.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")


def no_op_nlp_engine():
    """Presidio's no-op NLP engine (no spaCy model, nothing downloaded)."""
    import presidio_analyzer
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    conf = Path(presidio_analyzer.__file__).parent / "conf" / "no_op.yaml"
    return NlpEngineProvider(conf_file=str(conf)).create_engine()


@cache
def _adapter_class():
    from presidio_analyzer import Pattern, PatternRecognizer, RecognizerResult

    # The class name must not repeat one of Presidio's: its default registry looks predefined
    # recognizers up by class name among all PatternRecognizer subclasses.
    class CadrePatternRecognizer(PatternRecognizer):
        """A Cadre recognizer inside Presidio: same patterns, validators and spans."""

        def __init__(self, recognizer):
            super().__init__(
                supported_entity=recognizer.entity,
                name=recognizer.name,
                patterns=[
                    Pattern(name, regex, recognizer.score) for name, regex in recognizer.patterns
                ],
                context=list(recognizer.context_words),
                global_regex_flags=recognizer.flags,
            )
            self.cadre = recognizer

        def validate_result(self, pattern_text: str) -> bool | None:
            return self.cadre.validate_result(pattern_text)

        def analyze(self, text, entities, nlp_artifacts=None, regex_flags=None):
            return [
                RecognizerResult(
                    entity_type=found.type,
                    start=found.start,
                    end=found.end,
                    score=found.score,
                    recognition_metadata={
                        RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                        RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
                    },
                )
                for found in self.cadre.analyze(text, entities)
            ]

    return CadrePatternRecognizer


def as_presidio(recognizer):
    """A Presidio `PatternRecognizer` running this Cadre recognizer."""
    return _adapter_class()(recognizer)


def presidio_analyzer_for(recognizers):
    """An `AnalyzerEngine` (no-op NLP engine) whose registry holds these recognizers."""
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry

    registry = RecognizerRegistry(recognizers=[as_presidio(r) for r in recognizers])
    return AnalyzerEngine(
        registry=registry, nlp_engine=no_op_nlp_engine(), supported_languages=["en"]
    )


def presidio_default_analyzer():
    """Plain Presidio: its predefined recognizers with the no-op NLP engine (the baseline the
    throughput benchmark compares against)."""
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry

    nlp_engine = no_op_nlp_engine()
    registry = RecognizerRegistry(supported_languages=["en"])
    registry.load_predefined_recognizers(nlp_engine=nlp_engine, languages=["en"])
    return AnalyzerEngine(registry=registry, nlp_engine=nlp_engine, supported_languages=["en"])

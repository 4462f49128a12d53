"""What a teacher's calls cost when litellm's map cannot say: a pool entry's or an alias's own price."""

from __future__ import annotations

from pydantic import ConfigDict, model_validator

from ingestion.schema import StrictModel


class Price(StrictModel):
    """What a teacher's calls cost: exactly what a litellm-priced model costs (`as_model`, with its
    cached, cache-write and batch rates), or USD per million tokens. Endpoints with their own base URL
    are priced only by one of these; a name like `openai/gpt-5@http://host` is not a price.

    >>> Price.parse("gpt-5"), Price.parse("1.25/10/0.125")
    (Price(as_model='gpt-5', input=None, output=None, cached_input=None, cache_write=None), \
Price(as_model=None, input=1.25, output=10.0, cached_input=0.125, cache_write=None))
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    as_model: str | None = None
    input: float | None = None         # USD per million prompt tokens
    output: float | None = None        # USD per million completion tokens
    cached_input: float | None = None  # prompt tokens read from the provider's cache (default: input)
    cache_write: float | None = None   # prompt tokens written to it (default: input)

    @model_validator(mode="after")
    def _one_kind(self) -> Price:
        numbers = (self.input, self.output, self.cached_input, self.cache_write)
        if (self.as_model is None) == all(n is None for n in numbers) or (
                self.as_model is None and (self.input is None or self.output is None)):
            raise ValueError("a price is a model name (as_model) or input and output USD per 1M tokens")
        if any(n is not None and n < 0 for n in numbers):
            raise ValueError("a price cannot be negative")
        return self

    @classmethod
    def parse(cls, text: str) -> Price:
        """`gpt-5` (priced as that model) or `INPUT/OUTPUT[/CACHED_INPUT[/CACHE_WRITE]]` USD per 1M tokens
        (`0/0` for a free endpoint)."""
        try:
            numbers = [float(p) for p in text.split("/")]
        except ValueError:
            return cls(as_model=text)
        if numbers == [0.0]:
            return cls(input=0.0, output=0.0)
        if not 2 <= len(numbers) <= 4:
            raise ValueError(f"price {text!r}: INPUT/OUTPUT[/CACHED_INPUT[/CACHE_WRITE]] USD per 1M tokens")
        return cls(**dict(zip(("input", "output", "cached_input", "cache_write"), numbers, strict=False)))

"""PasswordGenerator and UUIDGenerator: a value generated once, kept in a Secret the generator owns.

The contract other kinds rely on (PushSecret, SecretSync's ``generatorRef`` sources): a generator
writes its value into a Secret of its own namespace that it owns (controller ownerReference),
whose name is in ``status.secretName``, under the key ``password`` or ``uuid``. A consumer names
a generator with ``generatorRef: {kind, name}`` — never a namespace: only generators of the
consumer's own namespace can be read.

Why the bounds: generating is cheap, but a tenant decides the length, so it is bounded (256
characters) like every other size a tenant sets; and without ``allowRepeat`` a character class
cannot give more distinct characters than it has, which CEL refuses at admission.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, Self

from pydantic import Field, model_validator

from secretferry.models import base

PASSWORD_GENERATOR_KIND: Final = "PasswordGenerator"
UUID_GENERATOR_KIND: Final = "UUIDGenerator"
GeneratorKind = Literal["PasswordGenerator", "UUIDGenerator"]
PLURALS: Final[dict[str, str]] = {
    PASSWORD_GENERATOR_KIND: "passwordgenerators",
    UUID_GENERATOR_KIND: "uuidgenerators",
}
KEYS: Final[dict[str, str]] = {PASSWORD_GENERATOR_KIND: "password", UUID_GENERATOR_KIND: "uuid"}
"""The data key each kind writes its value under (the generators contract)."""

REGENERATE_ANNOTATION: Final = "secretferry.io/regenerate"
"""On a generator: any new value (a token such as a date or a counter) asks for one regeneration.
The token honoured last is kept on the Secret and in status, so the same token never regenerates
twice, across restarts too."""

# Bounds (README, "Generators"): 8 characters is the least a password policy accepts; 256 bounds
# the cost and what a tenant can make the operator store, and is ESO's ceiling in practice.
MIN_LENGTH: Final = 8
MAX_LENGTH: Final = 256
DEFAULT_LENGTH: Final = 24
DIGIT_CHARACTERS: Final = "0123456789"
LOWER_CHARACTERS: Final = "abcdefghijklmnopqrstuvwxyz"
UPPER_CHARACTERS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# ESO's default set without the backslash, quote and backtick, which break shell and YAML quoting.
DEFAULT_SYMBOLS: Final = "~!@#$%^&*()_+-={}[]|:<>?,./"
# Printable ASCII that is neither a letter, a digit nor a space: 32 characters at most.
_SYMBOLS_PATTERN: Final = r"^[!-/:-@\[-`{-~]+$"
MAX_SYMBOL_CHARACTERS: Final = 32

# Helm keeps its release records in Secrets named so; no generator creates one.
_HELM_PREFIX: Final = "sh.helm.release.v1."

_COUNTS_FIT = base.cel(
    "self.digits + self.symbols <= self.length",
    "digits + symbols must not exceed length",
)
_DIGITS_DISTINCT = base.cel(
    f"self.allowRepeat || self.digits <= {len(DIGIT_CHARACTERS)}",
    f"without allowRepeat at most {len(DIGIT_CHARACTERS)} digits are possible",
    field_path=".digits",
)
_SYMBOLS_DISTINCT = base.cel(
    "self.allowRepeat || self.symbols <= size(self.symbolCharacters)",
    "without allowRepeat at most as many symbols as symbolCharacters has are possible",
    field_path=".symbols",
)
_LETTERS_DISTINCT = base.cel(
    "self.allowRepeat || self.length - self.digits - self.symbols <= (self.noUpper ? 26 : 52)",
    "without allowRepeat the letters (length - digits - symbols) must fit 26 lower-case"
    " (52 with upper case) distinct letters; set allowRepeat or shorten length",
    field_path=".length",
)
_NOT_HELM = base.cel(
    f"!has(self.name) || !self.name.startsWith('{_HELM_PREFIX}')",
    "Helm's release records are never written",
    field_path=".name",
)


class GeneratorTarget(base.CRModel, json_schema_extra=base.validations(_NOT_HELM)):
    """The Secret the generated value is kept in, always in the generator's own namespace."""

    name: str | None = Field(
        default=None,
        pattern=base.DNS_SUBDOMAIN_PATTERN,
        max_length=base.DNS_SUBDOMAIN_MAX,
    )
    """Name of the Secret in the generator's namespace; default: the generator's name. A Secret of
    that name that this generator does not own is never written (TargetConflict); Helm's release
    record names (sh.helm.release.v1.*) are refused."""

    @model_validator(mode="after")
    def _not_helm(self) -> Self:
        if self.name is not None and self.name.startswith(_HELM_PREFIX):
            raise ValueError("Helm's release records are never written")
        return self


class PasswordGeneratorSpec(
    base.CRModel,
    json_schema_extra=base.validations(_COUNTS_FIT, _DIGITS_DISTINCT, _SYMBOLS_DISTINCT, _LETTERS_DISTINCT),
):
    """How to generate a password (the field names of ESO's Password generator)."""

    length: int = Field(default=DEFAULT_LENGTH, ge=MIN_LENGTH, le=MAX_LENGTH)
    """Characters in the password, 8 to 256 (default 24)."""
    digits: int = Field(default=4, ge=0, le=MAX_LENGTH)
    """Exactly this many digits (default 4)."""
    symbols: int = Field(default=4, ge=0, le=MAX_LENGTH)
    """Exactly this many symbols from symbolCharacters (default 4); the rest are letters."""
    symbol_characters: str = Field(
        default=DEFAULT_SYMBOLS, min_length=1, max_length=MAX_SYMBOL_CHARACTERS, pattern=_SYMBOLS_PATTERN
    )
    """The symbols to choose from: printable ASCII punctuation, no letters, digits or spaces, each at
    most once, e.g. ``-_.`` (default ``~!@#$%^&*()_+-={}[]|:<>?,./``)."""
    no_upper: bool = False
    """Letters only in lower case (default false: lower and upper case)."""
    allow_repeat: bool = False
    """Allow a character to appear more than once (default false, as ESO). Without it a password
    has at most 10 digits, as many symbols as symbolCharacters holds, and 26 (or 52) letters."""
    target: GeneratorTarget = Field(default_factory=GeneratorTarget)
    """The Secret to keep the password in (key ``password``)."""

    @model_validator(mode="after")
    def _rules(self) -> Self:
        if self.digits + self.symbols > self.length:
            raise ValueError("digits + symbols must not exceed length")
        if len(set(self.symbol_characters)) != len(self.symbol_characters):
            raise ValueError("symbolCharacters lists a character twice")
        if not self.allow_repeat:
            letters = self.length - self.digits - self.symbols
            if self.digits > len(DIGIT_CHARACTERS):
                raise ValueError(f"without allowRepeat at most {len(DIGIT_CHARACTERS)} digits are possible")
            if self.symbols > len(self.symbol_characters):
                raise ValueError("without allowRepeat at most as many symbols as symbolCharacters has")
            if letters > (26 if self.no_upper else 52):
                raise ValueError("without allowRepeat the letters must fit the distinct letters available")
        return self

    def rules(self) -> dict[str, Any]:
        """What the value is generated from (not where it is kept): a change here makes the kept
        value predate the spec (SpecChangedSinceGenerated); a new target name does not."""
        return self.model_dump(by_alias=True, exclude={"target"})


class UUIDGeneratorSpec(base.CRModel):
    """A random UUID (version 4)."""

    target: GeneratorTarget = Field(default_factory=GeneratorTarget)
    """The Secret to keep the UUID in (key ``uuid``)."""

    def rules(self) -> dict[str, Any]:
        return {"version": 4}


class GeneratorStatus(base.StatusModel):
    """What the operator last did for this generator; written by the operator only. Never the value."""

    conditions: list[base.Condition] = base.conditions_field()
    """Ready: True (reason Generated) when the Secret holds a value generated under the current spec;
    True with reason SpecChangedSinceGenerated when the spec changed since (the value is kept until
    the regenerate annotation asks); False with the reason nothing could be written."""
    observed_generation: int | None = None
    """The metadata.generation the last pass worked on."""
    secret_name: str | None = None
    """The Secret holding the value, in this namespace: what consumers read."""
    generated_at: base.Time | None = None
    """When the value now in the Secret was generated."""
    regenerate_token: str | None = None
    """The secretferry.io/regenerate annotation value last honoured (a token, not the value)."""
    generations: int | None = None
    """How many values this generator has generated (the first one included)."""


class _Generator(base.CRModel):
    metadata: base.ObjectMeta
    status: GeneratorStatus = Field(default_factory=GeneratorStatus)

    KIND: ClassVar[str] = ""

    @property
    def secret_name(self) -> str:
        """``spec.target.name``, else the generator's own name."""
        target: GeneratorTarget = self.spec.target  # type: ignore[attr-defined]  # both kinds have one
        return target.name or self.metadata.name

    @property
    def key(self) -> str:
        return KEYS[self.KIND]

    @property
    def regenerate_token(self) -> str | None:
        token = self.metadata.annotations.get(REGENERATE_ANNOTATION, "").strip()
        return token or None


class PasswordGenerator(_Generator):
    """A parsed ``PasswordGenerator`` object."""

    KIND: ClassVar[str] = PASSWORD_GENERATOR_KIND
    spec: PasswordGeneratorSpec = Field(default_factory=PasswordGeneratorSpec)


class UUIDGenerator(_Generator):
    """A parsed ``UUIDGenerator`` object."""

    KIND: ClassVar[str] = UUID_GENERATOR_KIND
    spec: UUIDGeneratorSpec = Field(default_factory=UUIDGeneratorSpec)


Generator = PasswordGenerator | UUIDGenerator


def parse(kind: str, body: Mapping[str, Any]) -> Generator:
    """Parse a raw body of ``kind``; raises pydantic.ValidationError for an invalid spec."""
    data = base.lenient_status(body, GeneratorStatus)
    if kind == PASSWORD_GENERATOR_KIND:
        return PasswordGenerator.model_validate(data)
    if kind == UUID_GENERATOR_KIND:
        return UUIDGenerator.model_validate(data)
    raise ValueError(f"not a generator kind: {kind}")


class GeneratorRef(base.CRModel):
    """A generator in the referring object's own namespace (there is no namespace field on purpose:
    a generator's value is only ever read from its own namespace)."""

    kind: GeneratorKind
    """``PasswordGenerator`` (key ``password``) or ``UUIDGenerator`` (key ``uuid``)."""
    name: str = Field(pattern=base.DNS_SUBDOMAIN_PATTERN, max_length=base.DNS_SUBDOMAIN_MAX)
    """Name of the generator in the referring object's namespace."""

"""Settings: one validated, frozen model per session, with the defaults docs/settings.md lists.

:class:`BudgetConfig` is a pydantic-settings ``BaseSettings``: a setting not passed explicitly is
read from the environment variable ``TOOLBUDGET_<FIELD>`` (``TOOLBUDGET_RESULT_CAP=80000``,
``TOOLBUDGET_MODEL=claude-sonnet-4-5``; case-insensitive; ``tools`` as JSON), then falls back to
its default. Explicit arguments always win (pydantic-settings' source order: init arguments,
then the environment, then defaults).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from budget._config_messages import (
    ENV_PREFIX,
    describe,
    describe_too_deep,
    describe_unparsed,
    env_name,
    env_value,
    unknown_variables,
)
from budget._errors import ConfigError

__all__ = ["BudgetConfig", "PreviewShape", "ToolPolicy", "build_config", "config_reading"]

PreviewShape = Literal["auto", "head_tail", "head"]
CompactionMode = Literal["off", "auto", "manual"]
PositiveInt = Annotated[int, Field(gt=0)]
Share = Annotated[float, Field(ge=0.0, le=1.0)]


def _not_bool(value: Any, info: ValidationInfo, model: type[BaseModel]) -> Any:
    """A bool given for a setting that is a number is refused: pydantic would take ``True`` for
    the number 1 (``window=True``: a window of one token). Any other setting refuses it with
    pydantic's own words (a text, a choice, a dict of policies: not "a number")."""
    field = model.model_fields.get(info.field_name or "")
    # numpy's bool (np.True_, or a 0-d array of one) is no bool subclass, and pydantic takes it
    # for a number too; its dtype says what it is.
    boolean = isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b"
    if boolean and field is not None and _numeric(field.annotation):
        raise ValueError(f"a number, not {value}")
    return value


def _numeric(annotation: Any) -> bool:
    """Whether a setting's type takes an int or a float and no bool (``Annotated[int, ...] |
    None`` does; ``bool | None``, a ``Literal`` or ``str | None`` does not)."""
    members = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else ()
    bases = {get_args(a)[0] if get_origin(a) is Annotated else a for a in members or [annotation]}
    return bool(bases & {int, float}) and bool not in bases


class ToolPolicy(BaseModel):
    """Per-tool overrides: a different cap, an exemption from spilling, another preview shape."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(describe(exc, None, ToolPolicy.model_fields)) from None

    @field_validator("*", mode="before")
    @classmethod
    def _no_bools(cls, value: Any, info: ValidationInfo) -> Any:
        return _not_bool(value, info, cls)

    cap: PositiveInt | None = None
    """Characters above which this tool's results are spilled (None: the session's cap); one
    at or under the session's ``preview_chars`` acts as ``preview_chars + 1``. An output over it
    whose envelope (preview and frame) would not be shorter stays whole: an envelope never
    outgrows the output it replaces."""
    exempt: bool = False
    """Never spill or trim this tool's results (the read-back tool is always exempt)."""
    preview: PreviewShape | None = None


class BudgetConfig(BaseSettings):
    """Every setting of a session; refused when built if any value is out of range.

    Fields not given are read from ``TOOLBUDGET_<FIELD>`` environment variables, then defaulted.
    """

    # Every float finite (allow_inf_nan): an infinite timeout or price passes gt=0 and then breaks
    # far from here (threading refuses an infinite join timeout with an OverflowError).
    model_config = SettingsConfigDict(
        frozen=True, extra="forbid", env_prefix=ENV_PREFIX, allow_inf_nan=False
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # A .env file or secrets directory is read only where a subclass configures one: their
        # sources walk every field on each build even when there is none to read (0.5 of the
        # 1.2 ms a BudgetConfig() took).
        sources = [init_settings, env_settings]
        if cls.model_config.get("env_file") is not None:
            sources.append(dotenv_settings)
        if cls.model_config.get("secrets_dir") is not None:
            sources.append(file_secret_settings)
        return tuple(sources)

    # Pass 1: per-result cap.
    result_cap: PositiveInt = 50_000
    """A ceiling: a fresh result strictly longer than this many characters is always spilled;
    under it the cost policy (``budget.policy``) decides. A tool's own cap is a hard limit."""
    price_spills: bool = True
    """Let the cost policy spill a fresh result under ``result_cap`` when that costs less than
    keeping it; False: ``result_cap`` is a plain cap again (only longer results are spilled)."""
    dedupe_outputs: bool = True
    """Show a fresh result repeating an earlier result still shown whole, or re-running its call
    with a diff that fits a preview and half the output, as a short pointer to that earlier call
    (with the diff), its text stored like a spilled one's (``budget.passes.duplicate``)."""
    preview_chars: PositiveInt = 2_000
    """Characters of preview in an envelope (head and tail together)."""
    preview_shape: PreviewShape = "auto"
    """``auto``: the preview's shape is chosen from the content (errors first, JSON skeleton,
    table, diff, re-run delta, else head + tail; :mod:`budget.previews`); ``head_tail`` always
    the head and the tail; ``head`` the head alone (Claude Code's shape)."""
    tail_share: Share = 0.5
    """Share of the preview given to the tail, for results that are not errors."""
    error_tail_share: Share = 0.75
    """Share of the preview given to the tail for error results (errors and exit codes come last)."""
    include_path: bool = False
    """Name the spilled file's path in envelopes, for agents whose model has file tools."""

    # Pass 2: aggregate.
    group_budget: PositiveInt = 200_000
    """Characters the results answering one assistant message may take together (at most half
    the window: 2 characters per window token)."""

    # Pass 3: staleness.
    staleness: bool = True
    protect_rounds: Annotated[int, Field(ge=1)] = 5
    """The last this-many rounds are not trimmed as they age (but for what ``protect_turns``
    frees; after an overflow only the last round is kept)."""
    protect_turns: Annotated[int, Field(ge=1)] | None = 2
    """Results from before the user's this-many-th last turn (a prompt after the assistant
    spoke: ``budget.session._turns``) are no longer protected by ``protect_rounds``: the turns
    before were answered (the OpenAI Agents SDK's ``ToolOutputTrimmer`` keeps the last 2 user
    turns, ``recent_turns=2``). A trim still runs only when the cost policy prices it to pay.
    None: the rounds alone."""
    stale_floor: Annotated[int, Field(ge=0)] = 2_000
    """Results at or under this many characters are never trimmed where a cache is kept (the
    floor spares a re-write for little), at a cache read of 0.1x the base price or less; at a
    dearer read the floor falls in proportion, never under ``stub_chars``
    (``budget.policy.floor_at``). Without a cache the cost model prices any aged result longer
    than its stub."""
    stub_chars: Annotated[int, Field(ge=40)] = 300
    min_reclaim_tokens: Annotated[int, Field(ge=0)] = 10_000
    """Not read since the cost policy prices every batch (issue 30); kept so that settings
    naming it still load."""
    cache_ttl_s: Annotated[float, Field(gt=0)] = 300.0
    pressure: Annotated[float, Field(gt=0.0, le=1.0)] = 0.6
    """Not read since the cost policy prices the window's risk (issue 30: a bare threshold
    re-fired batch after batch as the context grew back); kept so that settings naming it
    still load."""
    cache_write_price: Annotated[float, Field(gt=0)] | None = None
    """A cache write, x the base input price. None: the published price of ``model``
    (``budget.policy.price_list``: Anthropic's 1.25 for 5-minute writes, 1.0 for OpenAI's and
    Google's automatic caching), Anthropic's when the model is not known. A price set here sets
    the 1-hour write's in the list's proportion (Anthropic's 1.25 : 2). Once the usage shows
    cache reads but never a write (automatic caching) the cost policy prices writes at the base
    price instead."""
    cache_read_price: Annotated[float, Field(ge=0)] | None = None
    """A cache read, x the base input price. None: the published price of ``model``
    (``budget.policy.price_list``: Claude 0.1, GPT-5 0.1, GPT-4.1, o3 and o4-mini 0.25, GPT-4o,
    o1 and o3-mini 0.5, Gemini 2.5 and newer 0.1), Anthropic's 0.1 when the model is not known."""
    cache_breakpoints: bool | None = None
    """Whether the provider caches at explicit breakpoints (Anthropic's ``cache_control``: a
    lookup reaches 20 blocks back, a write costs extra) or automatically by prefix (False:
    OpenAI, Google). None: the maker of ``model``; for a model not known, the API the messages
    are shaped for (OpenAI's formats carry no breakpoint: automatic). The usage corrects it:
    reads and never a write are automatic caching."""
    promise_tolerance: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.005
    """What a session may be billed above sending everything, as a share of its bill: a decision
    that can lose is taken when the savings banked plus this share cover its worst case, or when
    its chance of breaching that is at most ``promise_risk`` (``budget.policy.allowance``)."""
    promise_risk: Annotated[float, Field(ge=0, le=1)] = 0.05
    """The chance of breaching ``promise_tolerance`` a decision may carry (1: none asked, every
    decision taken on its expected saving alone)."""
    expected_requests_factor: Annotated[float, Field(gt=0)] = 0.5
    """Not read: the cost policy estimates the later requests from the session itself (Lindy's
    law, at most half the requests so far: a trim pays back two times in three)."""
    expected_requests_cap: PositiveInt = 50
    """Not read: the window bounds the cost policy's horizon instead."""

    # Window and tokens.
    window: PositiveInt | None = None
    """Context window in tokens (None: discovered, then looked up by model, then 128k)."""
    model: str | None = None
    image_chars: Annotated[int, Field(ge=0)] = 6_400
    """Characters an image or other non-text block counts as, for sizes."""

    # Read-back tool and per-tool policies.
    read_tool_name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")] = "toolbudget_read"
    read_page_chars: PositiveInt = 20_000
    """Most characters one read-back page returns (it pages instead of spilling)."""
    tools: dict[str, ToolPolicy] = Field(default_factory=dict)

    # Compaction (docs/concepts/compaction.md): summarize the old prefix, keep the recent tail.
    # Defaults follow Claude Code's published behaviour (its auto-compact): a summary
    # output reserve of min(max output, 20k), an auto-compact margin of 13k and a manual one of
    # 3k, a tail of at least 10k tokens and 5 messages under a 40k cap, a breaker after 3
    # consecutive failures.
    compaction: CompactionMode = "off"
    """``"auto"``: ``prepare`` compacts when the request nears the window; ``"manual"``: only
    ``Budget.compact()`` and the third prompt-too-long error in a row do; ``"off"``: neither
    automatic nor reactive compaction (an explicit ``Budget.compact()`` still compacts)."""
    compact_reserve_tokens: PositiveInt = 20_000
    """Window tokens kept for the summary call's output (Claude Code: min(max output, 20k))."""
    compact_margin_tokens: Annotated[int, Field(ge=0)] = 13_000
    """Safety margin under the window for automatic compaction."""
    compact_manual_margin_tokens: Annotated[int, Field(ge=0)] = 3_000
    """The smaller margin of a manual ``Budget.compact()``: the caller chose the moment."""
    compact_tail_tokens: Annotated[int, Field(ge=0)] = 10_000
    """The retained tail grows from the end until it holds at least this many tokens..."""
    compact_tail_messages: Annotated[int, Field(ge=1)] = 5
    """...and at least this many messages..."""
    compact_tail_max_tokens: PositiveInt = 40_000
    """...but never more tokens than this (a tool call and its results still stay together)."""
    compact_min_reclaim_tokens: Annotated[int, Field(ge=0)] = 10_000
    """Compaction runs only when the summarizable prefix holds at least this many tokens."""
    compact_breaker_failures: PositiveInt = 3
    """Consecutive failed compactions after which automatic compaction stops (the breaker)."""
    compact_files: Annotated[int, Field(ge=0)] = 5
    """Most recently read files attached as snapshots after a compaction."""
    compact_file_chars: Annotated[int, Field(ge=0)] = 20_000
    """Most characters of one file snapshot."""
    compact_constraint_chars: Annotated[int, Field(ge=0)] = 4_000
    """Most characters of user constraints carried verbatim after a compaction."""
    compact_timeout_s: Annotated[float, Field(gt=0, le=threading.TIMEOUT_MAX)] | None = 600.0
    """Seconds a summarizer may run before the compaction counts as failed (None: no limit).

    The default is the official SDKs' own request timeout, 10 minutes (``DEFAULT_TIMEOUT`` in
    ``anthropic/_constants.py`` of anthropic-sdk-python and ``openai/_constants.py`` of
    openai-python): a summarizer wrapping one SDK call gets the time that call has. A
    summarizer that runs past it is left running in its thread; its summary is dropped."""

    # Store.
    quota_bytes: PositiveInt | None = 1 << 30
    fsync: bool = True

    def __init__(self, **data: Any) -> None:
        # A pydantic ValidationError is no BudgetError: re-raise it as one naming the fields.
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(describe(exc, data, BudgetConfig.model_fields)) from None
        except SettingsError as exc:
            # An environment value that is not even JSON (TOOLBUDGET_TOOLS='{bad'): pydantic-
            # settings fails before validation, with its own exception, whose text names its
            # own classes ("from source EnvSettingsSource"); the JSON error under it says where.
            raise ConfigError(describe_unparsed(exc)) from None
        except RecursionError:
            raise ConfigError(describe_too_deep(type(self).model_fields)) from None
        # A subclass's own fields are read from their variables too: none of those is stray.
        unknown_variables(type(self).model_fields, os.environ)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bools(cls, value: Any, info: ValidationInfo) -> Any:
        return _not_bool(value, info, cls)

    @model_validator(mode="before")
    @classmethod
    def _none_spelled(cls, data: Any) -> Any:
        """``none`` or ``null`` (any case), as text, is None for a setting that may be None:
        from a variable (TOOLBUDGET_PROTECT_TURNS=none: the rounds alone), as ``toolbudget
        bench --set`` reads it. A setting that may not be None keeps the text."""
        if not isinstance(data, dict):
            return data
        spelled = [
            k
            for k, v in data.items()
            if isinstance(v, str) and k in NULLABLE and v.strip().lower() in NONE_WORDS
        ]
        return {**data, **dict.fromkeys(spelled)} if spelled else data

    @model_validator(mode="after")
    def _coherent(self) -> BudgetConfig:
        if self.preview_chars >= self.result_cap:
            raise ValueError(
                f"preview_chars ({self.preview_chars}) must be smaller than result_cap "
                f"({self.result_cap}), or an envelope could be larger than what it replaces"
            )
        if self.stub_chars >= self.stale_floor > 0:
            raise ValueError(
                f"stub_chars ({self.stub_chars}) must be smaller than stale_floor "
                f"({self.stale_floor}), or a trim could grow a result"
            )
        if self.compact_tail_tokens > self.compact_tail_max_tokens:
            raise ValueError(
                f"compact_tail_tokens ({self.compact_tail_tokens}) must not exceed "
                f"compact_tail_max_tokens ({self.compact_tail_max_tokens})"
            )
        if self.compact_manual_margin_tokens > self.compact_margin_tokens:
            raise ValueError(
                f"compact_manual_margin_tokens ({self.compact_manual_margin_tokens}) must not "
                f"exceed compact_margin_tokens ({self.compact_margin_tokens})"
            )
        return self

    def policy(self, tool: str) -> ToolPolicy:
        """The policy for ``tool``: the read-back tool is always exempt."""
        if tool == self.read_tool_name:
            return _EXEMPT
        return self.tools.get(tool, _DEFAULT_POLICY)

    def cap_for(self, tool: str) -> int | None:
        """Characters above which ``tool``'s results are spilled; None when exempt. A tool's cap
        at or under ``preview_chars`` is ``preview_chars + 1`` (``result_cap`` is refused under
        it when built); the cap pass keeps whole an output over it whose envelope would not be
        shorter, since an envelope never outgrows the output it replaces."""
        p = self.policy(tool)
        if p.exempt:
            return None
        return max(p.cap, self.preview_chars + 1) if p.cap is not None else self.result_cap


_DEFAULT_POLICY = ToolPolicy()
_EXEMPT = ToolPolicy(exempt=True)


def build_config(config: BudgetConfig | dict[str, object] | None) -> BudgetConfig:
    """A validated config from a model, a dict of settings, or None (the defaults)."""
    if config is None:
        return BudgetConfig()
    if isinstance(config, BudgetConfig):
        return config
    if not isinstance(config, dict):
        raise ConfigError(f"config must be a BudgetConfig or a dict, not {type(config).__name__}")
    return BudgetConfig(**config)


class _ExplicitOnly(BudgetConfig):
    """A :class:`BudgetConfig` built from its arguments alone: no environment variable is read."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


NONE_WORDS = frozenset({"none", "null"})
"""How ``None`` is spelled as text (any case), in a variable or in ``toolbudget bench --set``."""
NULLABLE: frozenset[str] = frozenset(
    name for name, f in BudgetConfig.model_fields.items() if type(None) in get_args(f.annotation)
)
"""The settings that may be None (a ``none`` given as text is None for them)."""


def config_reading(fields: Iterable[str]) -> BudgetConfig:
    """The defaults, with only ``fields`` read from their ``TOOLBUDGET_*`` variables.

    For a command that uses a few settings (``toolbudget read`` uses the read-back's page size):
    a bad value of a setting it does not use (``TOOLBUDGET_RESULT_CAP=banana``) must not stop it,
    while a bad value of one it uses is a :class:`ConfigError` naming the variable.
    """
    values: dict[str, Any] = {}
    for field in fields:
        if field not in BudgetConfig.model_fields:
            raise ConfigError(f"config: unknown setting {field!r}")
        value = env_value(field)
        if value is not None:
            values[field] = value
    try:
        return _ExplicitOnly(**values)
    except ConfigError as exc:
        names = ", ".join(env_name(f) for f in values)
        raise ConfigError(f"{exc} (from the environment: {names})") from None

"""Model providers as plugins: found through entry points, declared with typed options.

A provider says how to build one kind of model: its name (``llamacpp``), the
``module:attr`` of the factory that builds it (imported only when a model is
built, so listing providers stays cheap) and the options that factory takes,
each typed (:class:`ProviderOption`). Providers are found in the
``blendsql.models`` entry-point group; blendsql's own providers are registered
there the same way a third-party package registers its own, in its
``pyproject.toml``::

    [project.entry-points."blendsql.models"]
    echo = "blendsql_echo:PROVIDER"      # a Provider instance

:func:`register_provider` adds one from Python (tests, notebooks). Where the
installed metadata lacks blendsql's own group (a source tree that was never
installed), the same entry points are read from :data:`BUILTIN_POINTS`, so
nothing depends on installation. blendsql's own providers are defined below,
apart from their models: reading a provider's options must not import
llama.cpp or the OpenAI client (the command line lists every provider's flags
on each start).

The command line builds its model flags from every provider's options
(``ProviderOption.flag`` and ``env``), and ``blendsql.cli.resolve_model`` picks
the provider: ``--provider NAME``, else the highest ``priority`` provider whose
``selected_by`` options were given. Options are checked before the factory is
imported: an unknown name or a wrong type is a
:class:`~blendsql.errors.ModelOptionError` with a did-you-mean hint.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from blendsql.errors import ModelError, ModelOptionError
from blendsql.models.base import Model
from blendsql.models.hub import resolve_model_path
from blendsql.option_types import describe_types, has_type, unknown_hint
from blendsql.plugins import BUILTIN_DIST as BUILTIN_DIST  # the built-ins' distribution
from blendsql.plugins import group_points, load_point

#: the entry-point group providers register in
GROUP = "blendsql.models"
#: blendsql's own entry points, exactly as ``pyproject.toml`` declares them (a test keeps
#: the two equal); read only when the installed metadata lacks them
BUILTIN_POINTS: dict[str, str] = {
    "llamacpp": "blendsql.models.providers:LLAMACPP",
    "openai": "blendsql.models.providers:OPENAI",
    "recorded": "blendsql.models.providers:RECORDED",
    "guidance": "blendsql.models.providers:GUIDANCE",
    "function": "blendsql.models.providers:FUNCTION",
}
#: the provider the engine loads when no model is given (``BlendSQL(db)``, ``model="x.gguf"``)
DEFAULT_PROVIDER = "llamacpp"


@dataclass(frozen=True)
class ProviderOption:
    """One keyword argument of a provider's factory.

    ``types``: accepted value types (``object``: any; ``None`` always means "the
    factory's default"). ``flag``: the command-line flag without dashes (``None``:
    reachable only as ``--model-option NAME=VALUE``); ``env``: environment variables
    read, in order, when the flag is absent; ``fallback_flag``: another flag whose
    value stands in after those (an endpoint's model name from ``--model``).
    ``required``: the factory cannot do without it (``label`` names it in the error).
    ``check(value)`` raises a :class:`~blendsql.errors.ModelError` for a value of the
    right type that still cannot work (a missing file).
    """

    name: str
    types: tuple[Any, ...] = (str,)
    help: str = ""
    flag: str | None = None
    env: tuple[str, ...] = ()
    metavar: str = "VALUE"
    required: bool = False
    label: str = ""
    fallback_flag: str | None = None
    check: Callable[[Any], None] | None = None
    #: turns a value into what the factory takes, before the type check (a Hub name into
    #: a downloaded file's path); returning None leaves the option unset
    convert: Callable[[Any], Any] | None = None

    @property
    def dest(self) -> str | None:
        """The argparse destination of the flag (``--model-name`` -> ``model_name``)."""
        return self.flag.replace("-", "_") if self.flag else None

    def validate(self, value: Any, provider: str) -> Any:
        """``value`` (converted by ``convert``) if it has a declared type (and passes
        ``check``), else a ModelOptionError; None when ``convert`` unset it."""
        if self.convert is not None:
            value = self.convert(value)
            if value is None:
                return None
        if not has_type(value, self.types):
            raise ModelOptionError(
                f"{provider}: option {self.name}= must be {describe_types(self.types)}, "
                f"not {type(value).__name__} ({value!r})",
                hint=f"{self.name}: {self.help}" if self.help else None, option=self.name)
        if self.check is not None:
            self.check(value)
        return value


@dataclass(frozen=True)
class Provider:
    """A kind of model: its name, its factory (``module:attr``) and its typed options.

    ``selected_by``: option names whose presence on the command line selects this
    provider; ``priority`` decides when several are selected (an endpoint wins over
    a GGUF path). ``passthrough``: keywords beyond the declared ones go to the
    factory, which checks them itself (llama.cpp's own ``Llama`` arguments).
    """

    name: str
    factory: str
    options: tuple[ProviderOption, ...] = ()
    help: str = ""
    selected_by: tuple[str, ...] = ()
    priority: int = 0
    passthrough: bool = False
    _by_name: dict[str, ProviderOption] = field(default_factory=dict, init=False, repr=False,
                                                compare=False)

    def __post_init__(self) -> None:
        self._by_name.update({o.name: o for o in self.options})
        unknown = [s for s in self.selected_by if s not in self._by_name]
        if unknown or ":" not in self.factory:
            raise ModelError(f"provider {self.name!r} is malformed",
                             hint="factory is 'module:attr'; selected_by names its options"
                             + (f" (unknown: {', '.join(unknown)})" if unknown else ""))

    def option(self, name: str) -> ProviderOption | None:
        """The declared option called ``name``, or None."""
        return self._by_name.get(name)

    @property
    def attr(self) -> str:
        """The factory's attribute name (``LlamaCpp``): its public name in blendsql.models."""
        return self.factory.rpartition(":")[2]

    def load(self) -> Callable[..., Model]:
        """The factory, imported now."""
        module, _, attr = self.factory.partition(":")
        try:
            target: Callable[..., Model] = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ModelError(f"provider {self.name!r}: cannot import {self.factory} ({e})",
                             hint="is the package that provides it installed?") from e
        return target

    def check(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The options with ``None`` dropped, each name declared and each value typed."""
        out: dict[str, Any] = {}
        for name, value in values.items():
            if value is None:
                continue
            spec = self._by_name.get(name)
            if spec is None and not self.passthrough:
                raise ModelOptionError(
                    f"the {self.name} provider has no option {name!r}",
                    hint=unknown_hint(name, self._by_name, f"{self.name} takes"), option=name)
            checked = spec.validate(value, self.name) if spec is not None else value
            if checked is not None:
                out[name] = checked
        for spec in self.options:
            if spec.required and spec.name not in out:
                raise ModelError(f"no {spec.label or spec.name} for the {self.name} provider",
                                 hint=_how_to_give(spec))
        return out

    def create(self, **values: Any) -> Model:
        """A model built by the factory from checked options."""
        options = self.check(values)
        model = self.load()(**options)
        if not isinstance(model, Model):
            raise ModelError(f"provider {self.name!r} built {type(model).__name__}, not a Model",
                             hint=f"{self.factory} must return a blendsql.models.Model")
        return model


def _how_to_give(spec: ProviderOption) -> str:
    ways = [f"--{spec.flag}" if spec.flag else f"--model-option {spec.name}=..."]
    ways += [f"set {e}" for e in spec.env]
    return f"pass {spec.name}= in Python; on the command line " + " or ".join(ways)


# ---------------------------------------------------------------- blendsql's own providers


def _gguf_file(value: Any) -> None:
    """A GGUF path must name an existing file (checked before anything loads)."""
    if not Path(value).expanduser().is_file():
        raise ModelError(
            f"model file not found: {value}",
            hint="give the path of a .gguf file (--model PATH); for a server, --base-url URL "
            "--model-name NAME (OpenAI(name, base_url=...) in Python)",
        )


_TIMEOUT = ProviderOption("timeout", (float,), "time limit of one request, in seconds")

LLAMACPP = Provider(
    "llamacpp", "blendsql.models.llamacpp:LlamaCpp",
    help="a GGUF model run in-process by llama.cpp (default: the embedded SmolLM2)",
    options=(
        ProviderOption("path", (Path,), "GGUF file for llama.cpp, or a Hub model: "
                       "hf:ORG/REPO/FILE.gguf or a name `blendsql models` lists",
                       flag="model", env=("BLENDSQL_MODEL",), metavar="PATH",
                       check=_gguf_file, convert=resolve_model_path),
        ProviderOption("n_threads", (int,), "threads for token generation"),
        ProviderOption("n_threads_batch", (int,), "threads for prompt processing"),
        ProviderOption("n_ctx", (int,), "context window in tokens"),
        ProviderOption("seed", (int,), "sampling seed"),
        ProviderOption("extra_bufts", (bool,), "use llama.cpp's extra buffer types "
                       "(default: off on CPUs with AMX)"),
        _TIMEOUT,
    ),
    selected_by=("path",), priority=10,
    passthrough=True,  # llama_cpp.Llama's own arguments, checked by LlamaCpp
)

OPENAI = Provider(
    "openai", "blendsql.models.openai_compat:OpenAI",
    help="an OpenAI-compatible endpoint: OpenAI, vLLM, llama.cpp server, Ollama",
    options=(
        ProviderOption("model", (str,), "model name at --base-url", flag="model-name",
                       env=("BLENDSQL_MODEL_NAME",), metavar="NAME", required=True,
                       label="model name", fallback_flag="model"),
        ProviderOption("base_url", (str,), "OpenAI-compatible endpoint, e.g. "
                       "http://localhost:8080/v1 (several of one model: "
                       "blendsql.models.Pool.from_urls in Python)", flag="base-url", env=("BLENDSQL_BASE_URL",), metavar="URL"),
        ProviderOption("api_key", (str,), "API key for --base-url", flag="api-key",
                       env=("BLENDSQL_API_KEY", "OPENAI_API_KEY"), metavar="KEY"),
        ProviderOption("max_concurrency", (int,), "requests in flight at once"),
        ProviderOption("max_retries", (int,), "retries of a failed request"),
        ProviderOption("server_kind", (str,), "auto, openai, vllm, llamacpp or generic"),
        ProviderOption("backoff", (float,), "first retry delay, in seconds"),
        ProviderOption("max_backoff", (float,), "longest retry delay, in seconds"),
        _TIMEOUT,
    ),
    selected_by=("base_url",), priority=20,
)

RECORDED = Provider(
    "recorded", "blendsql.models.recorded:Recorded",
    help="answers recorded from a real model, replayed offline",
    options=(
        ProviderOption("path", (Path,), "the recording (JSON)", metavar="PATH"),
        ProviderOption("model", (Model,), "the real model to record from (Python only)"),
    ),
)

GUIDANCE = Provider(
    "guidance", "blendsql.models.guidance_model:Guidance",
    help="a guidance model brought by the user (Python only)",
    options=(
        ProviderOption("model", (object,), "a guidance.models.Model, or a GGUF path"),
        ProviderOption("name", (str,), "the model's name in traces"),
        ProviderOption("chat", (bool,), "send messages through the chat template"),
        _TIMEOUT,
    ),
)

FUNCTION = Provider(
    "function", "blendsql.models.base:FunctionModel",
    help="a Python callable as a model, for tests and rules (Python only)",
    options=(
        ProviderOption("fn", (Callable,), "called with each Request"),
        ProviderOption("name", (str,), "the model's name"),
        ProviderOption("cacheable", (bool,), "let the persistent cache keep its answers"),
        _TIMEOUT,
    ),
)


# ---------------------------------------------------------------- the registry


class _Registry:
    """Entry-point providers (read once) plus those registered from Python."""

    def __init__(self) -> None:
        self.found: dict[str, Provider] | None = None
        self.added: dict[str, Provider] = {}

    def all(self) -> dict[str, Provider]:
        if self.found is None:
            self.found = discover()
        return {**self.found, **self.added}


_REGISTRY = _Registry()


def discover() -> dict[str, Provider]:
    """Providers in the ``blendsql.models`` entry-point group, the built-ins first.

    An entry point that cannot be loaded, or names something other than a
    :class:`Provider`, is skipped with a warning (one broken plugin must not
    break every command). A plugin may not take a built-in provider's name.
    """
    own, plugins = group_points(GROUP, BUILTIN_POINTS)
    found: dict[str, Provider] = {}
    for point in [*own, *plugins]:
        provider = _load_point(point)
        if provider is None:
            continue
        if provider.name in found:
            warnings.warn(f"model provider {provider.name!r} from {point.value} ignored: "
                          "the name is taken", RuntimeWarning, stacklevel=2)
            continue
        found[provider.name] = provider
    return found


def _load_point(point: importlib.metadata.EntryPoint) -> Provider | None:
    return cast("Provider | None", load_point(
        point, "model provider", lambda obj: isinstance(obj, Provider),
        "a blendsql.models.providers.Provider"))


def providers() -> dict[str, Provider]:
    """Every provider by name: entry points (read once) and :func:`register_provider`'s."""
    return _REGISTRY.all()


def get_provider(name: str) -> Provider:
    """The provider called ``name`` (case-insensitive), or a ModelError with a did-you-mean."""
    known = providers()
    found = known.get(name) or {k.lower(): v for k, v in known.items()}.get(name.lower())
    if found is None:
        raise ModelError(f"no model provider named {name!r}",
                         hint=unknown_hint(name, known, "providers"))
    return found


def register_provider(provider: Provider, *, replace: bool = False) -> Provider:
    """Add ``provider`` from Python (it wins over an entry point of the same name).

    A name already registered from Python is refused unless ``replace=True``.
    """
    if not isinstance(provider, Provider):
        raise ModelError(f"{provider!r} is not a Provider",
                         hint="build one with blendsql.models.providers.Provider(name, "
                         "'module:Factory', options=(...))")
    if provider.name in _REGISTRY.added and not replace:
        raise ModelError(f"a model provider named {provider.name!r} is already registered",
                         hint="pass replace=True, or unregister_provider(name) first")
    _REGISTRY.added[provider.name] = provider
    return provider


def unregister_provider(name: str) -> None:
    """Remove a provider added with :func:`register_provider` (entry points stay)."""
    _REGISTRY.added.pop(name, None)


def reload_providers() -> None:
    """Read the entry points again (after installing or removing a plugin)."""
    _REGISTRY.found = None


def by_factory_name(name: str) -> Provider | None:
    """The provider whose factory is called ``name`` (``LlamaCpp``), for blendsql.models."""
    return next((p for p in providers().values() if p.attr == name), None)


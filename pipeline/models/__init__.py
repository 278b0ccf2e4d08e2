"""Models: the protocol every adapter implements, and its values.

Adapters live in their own modules so that their SDKs load only when used:
``from pipeline.models.openai import OpenAIModel`` (extra ``openai``) and
``from pipeline.models.anthropic import AnthropicModel`` (extra ``anthropic``).
:func:`from_env` picks one of them when its API key is set; :func:`fallback`
calls a backup model only when the one before it failed; :func:`cached`
answers a request asked before from a cache, without calling the model.
"""

from typing import TYPE_CHECKING

from .._moved import moved
from ._cached import CachedModel as CachedModel
from ._cached import cached as cached
from ._env import from_env as from_env
from ._fallback import Fallback as Fallback
from ._fallback import fallback as fallback
from ._parts import PartLimits as PartLimits
from ._types import DeltaSink as DeltaSink
from ._types import Model as Model
from ._types import ModelDelta as ModelDelta
from ._types import ModelRequest as ModelRequest
from ._types import ModelResponse as ModelResponse
from ._types import ResponseSchema as ResponseSchema
from ._types import TextDelta as TextDelta
from ._types import ToolCallAssembler as ToolCallAssembler
from ._types import ToolCallDelta as ToolCallDelta
from ._types import ToolSpec as ToolSpec


__all__ = (
    "CachedModel",
    "DeltaSink",
    "Fallback",
    "Model",
    "ModelDelta",
    "ModelRequest",
    "ModelResponse",
    "PartLimits",
    "ResponseSchema",
    "TextDelta",
    "ToolCallAssembler",
    "ToolCallDelta",
    "ToolSpec",
    "cached",
    "fallback",
    "from_env",
)

_MOVED: dict[str, str] = {
    "ModelError": "pipeline.failures:ModelError",
}

if not TYPE_CHECKING:  # type checkers refuse the old paths
    __getattr__ = moved(__name__, _MOVED)

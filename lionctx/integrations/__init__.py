"""One module per host framework, each an optional extra.

* :mod:`lionctx.integrations.lionagi` (``lionctx[lionagi]``): real LionAGI branches;
* :mod:`lionctx.integrations.openai_agents` (``lionctx[openai-agents]``);
* :mod:`lionctx.integrations.pydantic_ai` (``lionctx[pydantic-ai]``);
* :mod:`lionctx.integrations.agent_framework` (``lionctx[agent-framework]``).

Importing this package imports no host; each module imports its host only when used.
"""

__all__: list[str] = []  # the host modules are imported by name, each with its extra


def __dir__() -> list[str]:
    return sorted(__all__)

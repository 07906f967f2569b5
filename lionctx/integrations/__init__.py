"""One module per host framework, each an optional extra.

* :mod:`lionctx.integrations.lionagi` (``lionctx[lionagi]``): real LionAGI branches;
* :mod:`lionctx.integrations.openai_agents` (``lionctx[openai-agents]``);
* :mod:`lionctx.integrations.pydantic_ai` (``lionctx[pydantic-ai]``);
* :mod:`lionctx.integrations.agent_framework` (``lionctx[agent-framework]``).

Importing this package imports no host; each module imports its host only when used.
"""

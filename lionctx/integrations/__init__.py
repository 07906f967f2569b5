"""One module per host framework (``lionagi``, ``openai_agents``, ``pydantic_ai``,
``agent_framework``), each an optional extra; importing this package imports no host."""

__all__: list[str] = []  # the host modules are imported by name, each with its extra


def __dir__() -> list[str]:
    return sorted(__all__)

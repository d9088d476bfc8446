"""Agent nodes at run time: the durable LLM loop (``loop``), its state (``state``), its
tools (``tools``), answer checks (``output``) and the checks of resume values (``answers``).

The executor (``runtime/executors/agent.py``) runs a unit of an agent node with them.
"""

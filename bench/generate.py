"""Generated workflows for the benchmarks: N nodes with templates, guards, fan-in and loops."""

from __future__ import annotations

import json


def workflow_yaml(nodes: int, *, loop_every: int = 100) -> str:
    """A YAML workflow of ``nodes`` task nodes.

    Node i needs node i-1 (and i-7 every 5th node), reads their outputs and an input in its
    arguments, every 10th node has a guard, and every ``loop_every`` nodes a loop closes back
    over the previous 10 nodes.
    """
    lines = [
        "tether: 1",
        f"name: generated_{nodes}",
        "inputs:",
        "  seed: {type: integer, default: 1}",
        "  label: {type: string, default: bench}",
        "nodes:",
    ]
    for i in range(nodes):
        lines.append(f"  n{i}:")
        lines.append("    task: bench.step")
        needs = [f"n{i - 1}"] if i else []
        if i % 5 == 0 and i >= 7:
            needs.append(f"n{i - 7}")
        if needs:
            lines.append(f"    needs: [{', '.join(needs)}]")
        value = "{{ inputs.seed }}" if not i else f"{{{{ nodes.n{i - 1}.output.value + 1 }}}}"
        lines.append(f'    with: {{value: "{value}", tag: "{{{{ inputs.label }}}}-{i}"}}')
        if i % 10 == 3:
            lines.append('    when: "{{ inputs.seed > 0 }}"')
        if i % loop_every == loop_every - 1 and i >= 10:
            lines.append(
                f'    loop: {{to: n{i - 9}, while: "{{{{ iteration < 2 }}}}", max_iterations: 3}}'
            )
    lines.append(f'output: "{{{{ nodes.n{nodes - 1}.output }}}}"')
    return "\n".join(lines) + "\n"


def workflow_flow(nodes: int, *, loop_every: int = 100) -> str:
    """The same workflow in the .flow syntax."""
    lines = [f"workflow generated_{nodes}", "input seed: integer = 1",
             'input label: string = "bench"']
    for i in range(nodes):
        value = "{{ inputs.seed }}" if not i else f"{{{{ nodes.n{i - 1}.output.value + 1 }}}}"
        head = f'task n{i} = bench.step(value: {value}, tag: "{{{{ inputs.label }}}}-{i}")'
        needs = [f"n{i - 1}"] if i else []
        if i % 5 == 0 and i >= 7:
            needs.append(f"n{i - 7}")
        clauses = []
        if needs:
            clauses.append("after " + ", ".join(needs))
        if i % 10 == 3:
            clauses.append("when {{ inputs.seed > 0 }}")
        if i % loop_every == loop_every - 1 and i >= 10:
            clauses.append(f"loop to n{i - 9} while {{{{ iteration < 2 }}}} max 3")
        lines.append(head)
        lines.extend("    " + c for c in clauses)
    lines.append(f"output {{{{ nodes.n{nodes - 1}.output }}}}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(json.dumps(workflow_yaml(3)))

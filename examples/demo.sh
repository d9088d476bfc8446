#!/usr/bin/env bash
# The refund example end to end: start (it pauses for a manager), list what is pending,
# approve with `tether resume`, and show the completed run's checkpoint timeline.
set -euo pipefail
cd "$(dirname "$0")/.."
export TETHER_DB="${DEMO_DB:-sqlite:///.tether/demo.db}"
export TETHER_EXAMPLE_LEDGER=.tether/demo-ledger.jsonl
tasks=examples/refund/tasks.py
mkdir -p .tether

echo "== tether check --import-tasks examples/"
# --import-tasks: also check task names and arguments against the modules listed in
# [tool.tether] tasks of pyproject.toml (check imports no code without it)
tether check --import-tasks examples/
echo
echo "== tether run examples/refund/refund.yaml --input amount=250 --input account=ACC-42"
set +e
tether run examples/refund/refund.yaml --tasks "$tasks" --input amount=250 \
    --input account=ACC-42 --json > .tether/demo-run.json
code=$?
set -e
cat .tether/demo-run.json
if [ "$code" -ne 4 ]; then echo "expected the run to pause (exit 4), got $code" >&2; exit 1; fi
run_id=$(python3 -c 'import json; print(json.load(open(".tether/demo-run.json"))["execution_id"])')
echo
echo "== tether pending"
tether pending
echo
echo "== tether resume $run_id --value '{\"approved\": true, \"note\": \"ok by Grace\"}'"
tether resume "$run_id" --tasks "$tasks" --value '{"approved": true, "note": "ok by Grace"}'
echo
echo "== tether show $run_id"
tether show "$run_id"

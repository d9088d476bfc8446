#!/usr/bin/env bash
# The refund example end to end: start (it pauses for a manager), list what is pending,
# approve with `tether resume`, and show the completed run's checkpoint timeline. Then the
# payments agent, offline against the scripted model of tether.testing: it looks the invoice
# up, pauses before paying for a human's approval, and pays once when resumed.
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

echo
echo "== the payments agent, against a scripted model (python -m tether.testing serve)"
python3 -m tether.testing serve --script examples/payments/script.json \
    > .tether/demo-model.out 2>&1 &
model_pid=$!
trap 'kill "$model_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 500); do
    port=$(head -n 1 .tether/demo-model.out 2>/dev/null || true)
    case "$port" in ''|*[!0-9]*) sleep 0.02 ;; *) break ;; esac
done
export OPENAI_BASE_URL="http://127.0.0.1:$port/v1" OPENAI_API_KEY=demo-key-not-a-secret
payments=examples/payments/tasks.py
echo "== tether run examples/payments/payments.yaml --input invoice=INV-7"
set +e
tether run examples/payments/payments.yaml --tasks "$payments" --input invoice=INV-7 \
    --json > .tether/demo-agent.json
code=$?
set -e
cat .tether/demo-agent.json
if [ "$code" -ne 4 ]; then echo "expected the agent to pause (exit 4), got $code" >&2; exit 1; fi
agent_id=$(python3 -c 'import json; print(json.load(open(".tether/demo-agent.json"))["execution_id"])')
echo
echo "== tether pending   (the payment waits for a human: call id, tool and arguments)"
tether pending
echo
echo "== tether resume $agent_id --value '{\"approved\": true}'"
tether resume "$agent_id" --tasks "$payments" --value '{"approved": true}'
echo
echo "== tether show $agent_id"
tether show "$agent_id"

/*
 * tether's run protocol as a Promela model, checked by Spin: claim, lease, fence, answer,
 * timer, continue and cancel, for one run of three nodes (a task, an approval, a task)
 * served by two workers that may crash (SIGKILL) and stall past their lease (SIGSTOP).
 *
 * docs/internals.md ("A model of the protocol") maps every variable and process to the code
 * (runs.owner, runs.lease_until, the fence in stores/sql_leases.py, the claim in
 * stores/sql_queue.py, Attempt.check in runtime/attempt.py ...) and says how to run it;
 * tests/test_protocol_model.py runs it in CI.
 *
 * Checked:
 *   safety (assertions):  every committed write is the current owner's (at most one owner's
 *                         writes commit per run at any time); each node's completion commits
 *                         once; a cancelled run starts no node; a finished run stays so.
 *   liveness (ltl done):  with weak fairness, finitely many crashes and stalls, the run ends
 *                         (completed or cancelled): every answered, due or crashed run is
 *                         continued, since some worker can always serve it.
 *
 * Planted bugs, for the test that shows the checker catches them:
 *   -DNOFENCE   fenced writes do not check runs.owner (one-owner assertion fails);
 *   -DNORECOVER nothing takes a running run back (neither an expired lease nor a dead
 *               holder's): a crashed run is never continued, and `ltl done` fails;
 *   -DNOCHECK   Attempt.check does not renew a lease its clock says ran out (a stalled
 *               holder starts a node of a run cancelled meanwhile).
 */

#define NODES     3
#define APPROVAL  1   /* node 1 pauses for an answer (a human, or its timer's on_timeout) */
#define WORKERS   2
#define MAX_CRASHES 2
#define MAX_STALLS  2
#define NONE      0

mtype = { QUEUED, RUNNING, PAUSED, COMPLETED, CANCELLED };

/* ---- the runs row ---------------------------------------------------------------------- */
mtype status = QUEUED;     /* runs.status */
byte owner = NONE;         /* runs.owner: the holding attempt's token (NONE: NULL) */
bool expired = false;      /* runs.lease_until < now */
bool cancel_req = false;   /* runs.cancel_requested_at IS NOT NULL */

/* ---- checkpoints, pending_interrupts, decisions ----------------------------------------- */
byte committed[NODES];     /* commits of node i's completed checkpoint */
bool pending = false;      /* the approval's pending_interrupts row */
bool decision = false;     /* its decisions row (an answer, or the timer's on_timeout) */
bool due = false;          /* the approval's timeout has passed */
bool finished = false;     /* the run ended (run_end written): completed or cancelled */

/* ---- the attempts ---------------------------------------------------------------------- */
byte next_token = 1;       /* new_owner(): every claim a fresh token */
byte tok[WORKERS];         /* the token of worker w's live attempt (NONE: idle or dead) */
bool valid[WORKERS];       /* Attempt.valid_until not yet passed (by the holder's clock) */
byte crashes = 0;
byte stalls = 0;

/* The claim (sql_queue.claim_runs, one transaction): queued and not cancelled; running with
   no owner or an expired lease (recovered); paused, released, with an answer (answered). */
/* tether resume takes a run at once from a holder proven dead (stores/owners.py: its pid is
   gone), instead of waiting for the lease: acquire(..., steal_from=holder). */
#define DEAD_HOLDER (owner != NONE && tok[0] != owner && tok[1] != owner)
#ifdef NORECOVER
#define RECOVERED false
#else
#define RECOVERED (status == RUNNING && (owner == NONE || expired || DEAD_HOLDER))
#endif
#define CLAIMABLE ((status == QUEUED && !cancel_req) || RECOVERED || \
                   (status == PAUSED && owner == NONE && decision))

/* No live attempt whose own clock still trusts its lease holds the run. The DB's lease can
   expire only then: an attempt's deadline (monotonic) ends before the lease_until it wrote. */
#define UNTRUSTED (!(tok[0] == owner && valid[0]) && !(tok[1] == owner && valid[1]))

#ifdef NOFENCE
#define FENCED(me) true
#else
#define FENCED(me) (owner == me)
#endif

/* Attempt.check: an attempt whose clock says its lease ran out renews before it starts
   anything (losing the run if another owner holds it). */
#ifdef NOCHECK
#define STALE(w) false
#else
#define STALE(w) (!valid[w])
#endif

/* A fenced write commits only where FENCED holds; the one-owner invariant is that every
   committed write is the current owner's. */
#define COMMIT_CHECK(me) assert(owner == me)

/* SIGKILL here: the process dies, its lease stays until it expires; a new worker process
   starts (the same proctype, idle, without a token). */
#define CRASH_POINT \
    if \
    :: crashes < MAX_CRASHES -> crashes++; goto dead \
    :: true -> skip \
    fi

proctype Worker(byte w) {
    byte me = NONE;
    byte at;

end_idle:
    atomic {
        CLAIMABLE && !finished ->
        me = next_token; next_token++;
        owner = me; expired = false; status = RUNNING;
        tok[w] = me; valid[w] = true
    }
    /* read the run's state: the first node whose completion is not committed */
    atomic {
        at = 0;
        do
        :: at < NODES && committed[at] > 0 -> at++
        :: else -> break
        od
    }

drive:
    CRASH_POINT;
    if
    :: at == NODES ->
        /* run_end and release, fenced (the run's last write) */
        atomic {
            if
            :: FENCED(me) -> COMMIT_CHECK(me); status = COMPLETED; finished = true;
                             owner = NONE; tok[w] = NONE; goto end_idle
            :: else -> goto lost
            fi
        }
    :: else -> skip
    fi;
    /* the node boundary: Attempt.check (renew synchronously once its clock ran out), then the
       worker's boundary hook (cancel), then the unit starts; one step, no wait between */
    atomic {
        if
        :: STALE(w) ->
            if
            :: owner == me -> valid[w] = true; expired = false   /* renew: WHERE owner = me */
            :: else -> goto lost
            fi
        :: else -> skip
        fi;
        if
        :: cancel_req -> goto cancelling
        :: else -> assert(status != CANCELLED && !finished)       /* starts node `at` */
        fi
    }
    if
    :: at == APPROVAL && !decision -> goto pause
    :: else -> skip
    fi;
    CRASH_POINT;
    /* the node's completed checkpoint, fenced (journal.put -> store.put(row, owner)) */
    atomic {
        if
        :: FENCED(me) ->
            COMMIT_CHECK(me);
            committed[at]++;
            assert(committed[at] == 1);
            at++
        :: else -> goto lost
        fi
    }
    goto drive;

pause:
    /* record_interrupt: the interrupted checkpoint and the pending row, one fenced
       transaction (a recovered attempt finds the row already there and only pauses) */
    atomic {
        if
        :: FENCED(me) -> COMMIT_CHECK(me); pending = !decision
        :: else -> goto lost
        fi
    }
    CRASH_POINT;
    /* pause_run: fenced; serialised with the answer's claim, so an answer claimed since is
       applied here instead of pausing */
    atomic {
        if
        :: !FENCED(me) -> goto lost
        :: FENCED(me) && decision -> goto drive
        :: FENCED(me) && !decision ->
            COMMIT_CHECK(me); status = PAUSED; owner = NONE; tok[w] = NONE; goto end_idle
        fi
    }

cancelling:
    /* StopAtBoundary(cancel): the run ends cancelled, fenced */
    atomic {
        if
        :: FENCED(me) -> COMMIT_CHECK(me); status = CANCELLED; finished = true;
                         pending = false; owner = NONE; tok[w] = NONE; goto end_idle
        :: else -> goto lost
        fi
    }

lost:
    /* LeaseLost: the attempt stops, writing nothing more */
    tok[w] = NONE;
    goto end_idle;

dead:
    tok[w] = NONE;
    goto end_idle
}

/* An answer: Runner.resume / the console / the API claim the pending row (delete it and
   insert the decision, one transaction serialised on the run row). */
active proctype Answerer() {
end:
    atomic { pending -> pending = false; decision = true }
}

/* The approval's timeout: time passes, then the worker's timer sweep claims the row with the
   on_timeout answer (the same claim: only one of the answer and the timer wins). */
active proctype Timer() {
end:
    do
    :: atomic { pending && !due -> due = true }
    :: atomic { pending && due -> pending = false; decision = true; break }
    od
}

/* tether cancel (sql_queue.request_cancel, one transaction on the locked run row). */
active proctype Canceller() {
    atomic {
        if
        :: status == COMPLETED || status == CANCELLED -> skip
        :: else ->
            cancel_req = true;
            if
            :: owner != NONE && !expired -> skip     /* requested: the holder stops */
            :: else -> status = CANCELLED; finished = true; owner = NONE; pending = false
            fi
        fi
    }
}

/* Time: a holder stalls past its deadline (SIGSTOP, a stuck heartbeat), finitely often;
   a lease no live, trusting attempt holds expires. */
active proctype Clock() {
end:
    do
    :: atomic { stalls < MAX_STALLS && owner != NONE && tok[0] == owner && valid[0] ->
                valid[0] = false; stalls++ }
    :: atomic { stalls < MAX_STALLS && owner != NONE && tok[1] == owner && valid[1] ->
                valid[1] = false; stalls++ }
    :: atomic { owner != NONE && !expired && UNTRUSTED -> expired = true }
    od
}

init {
    atomic {
        run Worker(0);
        run Worker(1)
    }
}

/* Every run ends: answered, due and crashed runs are continued, since some worker can
   always serve them (-DNFAIR=3, pan -a -f: weak fairness). */
ltl done { <> finished }

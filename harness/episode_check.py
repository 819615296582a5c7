"""Whether a repo-fix instance can be solved through the path every submission takes.

A gold episode (the scripted gold policy working the task in a sandbox; its submission is the
diff of the work tree, graded in a fresh sandbox by the grader in the default mode) must resolve
the instance, its submission touching exactly the gold patch's files; an empty episode must not.
Synthesis and mining keep an instance only then: applying the gold patch directly would miss what
the environment adds to a submission, or a review that refuses it.
"""

from __future__ import annotations

from sandboxes import Backend
from tasks.grading.patch_policy import parse_patch
from tasks.swe import instance_to_task

from .episode import run_episode
from .policies.scripted import EmptyPolicy, GoldPolicy
from .policy import Sampling


def episode_check(instance: dict, backend: Backend) -> str:
    """Why `instance` fails the check ("" when the gold episode resolves it and the empty one does not)."""
    task = instance_to_task(instance)
    for policy, resolves in ((GoldPolicy(), True), (EmptyPolicy(), False)):
        trajectory = run_episode(task, policy, Sampling(), backend=backend)
        if trajectory.error:
            return f"the {policy.name} episode failed: {trajectory.error[-500:]}"
        details = trajectory.reward_details
        if bool(details.get("resolved")) != resolves:
            why = "; ".join(details.get("rejected") or []) or details.get("invalid_log") or ""
            return f"the {policy.name} episode's submission was {details.get('verdict') or 'not graded'}" + (
                f": {why}" if why else ""
            )
        if resolves:
            submitted = sorted(f.path for f in parse_patch(trajectory.model_patch))
            gold = sorted(f.path for f in parse_patch(instance.get("patch") or ""))
            if submitted != gold:
                return f"the gold episode submitted changes to {', '.join(submitted)}; the gold patch changes {', '.join(gold)}"
    return ""

"""swe-tiny: generated repo-fix tasks on one shared image, real episodes, the real grader."""

from __future__ import annotations

import subprocess

import pytest

from harness.episode import run_episode
from harness.policies.scripted import EmptyPolicy, GoldPolicy, ScriptedPolicy
from harness.policy import Sampling
from harness.policy import tool_turn as call
from tasks.grading.grade import grade
from tasks.swe_tiny import (
    HELDOUT_FIXES,
    PROMPT,
    RL_FIXES,
    VALIDATION_FIXES,
    WIDE_KS,
    fix_of,
    make_instance,
    swe_tiny_instances,
    verify_test_lists,
)
from tasks.taskset import load_tasks
from tests.conftest import same_change

SAMPLING = Sampling(max_tokens=64, temperature=0.0)


def seen_by_the_model(instance: dict) -> tuple[str, tuple[str, str]]:
    """The prompt a model gets, and the fix it reads there: the line the statement quotes -> the line it names."""
    statement = instance["problem_statement"]
    prompt = PROMPT.format(workdir=instance["workdir"], problem_statement=statement)
    return prompt, (statement.rpartition(" is: ")[2], statement.split("should compute: ")[1].split("\n")[0])


def test_held_out_shares_no_statement_and_no_fix_with_training():
    """On the whole of the three splits, as the model sees them: no prompt and no fix (buggy line -> correct line) of
    the 200 held-out or the 100 validation instances appears among the 4,000 training ones or in the other split, and
    the held-out and validation statements are all distinct."""
    heldout, val, train = map(
        dict, ([seen_by_the_model(i) for i in swe_tiny_instances(split)] for split in ("heldout", "val", "train"))
    )
    assert len(heldout) == 200 and len(set(heldout.values())) == len(HELDOUT_FIXES) == 17
    assert len(val) == 100 and len(set(val.values())) == len(VALIDATION_FIXES) == 8
    assert len(swe_tiny_instances("train")) == 4000 and len(set(train.values())) == 63
    for one, other in ((heldout, train), (val, train), (heldout, val)):
        assert not one.keys() & other.keys()
        assert not set(one.values()) & set(other.values())
    assert {fix_of(i) for i in swe_tiny_instances("heldout")} == set(
        heldout.values()
    )  # what the statement names is the fix


def test_the_reward_only_prompts_have_fixes_no_demonstration_set_has():
    """swe-tiny-rl and swe-tiny-sft split the training draws by fix: prompts trained on reward alone never show a fix
    a demonstration of swe-tiny-sft shows, nor a held-out or validation one."""
    sft, rl = (dict(seen_by_the_model(i) for i in load) for load in map(swe_tiny_instances, ("sft", "rl")))
    assert (len(swe_tiny_instances("sft")), len(swe_tiny_instances("rl"))) == (4000, 1000)
    assert {i["instance_id"].rsplit("-", 1)[0] for i in swe_tiny_instances("rl")} == {"swe-tiny-rl"}  # ids of its own
    assert len(set(sft.values())) == 42 and set(rl.values()) == RL_FIXES and len(RL_FIXES) == 21
    assert not sft.keys() & rl.keys() and not set(sft.values()) & set(rl.values())
    assert not RL_FIXES & (HELDOUT_FIXES | VALIDATION_FIXES)
    train = [fix_of(i) for i in swe_tiny_instances("train")]
    assert set(train) == set(sft.values()) | RL_FIXES  # the two subsets are the training fixes, nothing else


def test_the_unique_splits_never_repeat_a_fix_within_or_across_them():
    """swe-tiny-unique and its -val, -sft and -rl sets: every instance's fix (as the model reads it) is its own, none
    is in another set or in the other swe-tiny sets, the constant is a wide one, and the ids say the set."""
    seen = {}
    for split, size in (("heldout", 200), ("val", 100), ("sft", 2000), ("rl", 1000)):
        instances = swe_tiny_instances(f"unique-{split}")
        fixes = [seen_by_the_model(i)[1] for i in instances]
        assert len(instances) == len(set(fixes)) == size
        assert fixes == [fix_of(i) for i in instances]
        assert all(any(str(k) in fix[1] for k in WIDE_KS) for fix in fixes[:100])
        assert {i["instance_id"].rsplit("-", 1)[0] for i in instances} == {f"swe-tiny-unique-{split}"}
        for other, other_fixes in seen.items():
            assert not set(fixes) & other_fixes, (split, other)
        seen[split] = set(fixes)
    everything = set().union(*seen.values())
    assert not everything & {fix_of(i) for i in swe_tiny_instances("train")}
    assert not everything & (HELDOUT_FIXES | VALIDATION_FIXES)
    assert [t.id for t in load_tasks("swe-tiny-unique-val")][:2] == [
        "swe-tiny-unique-val-00000",
        "swe-tiny-unique-val-00001",
    ]


def test_generation_is_deterministic_distinct_and_of_every_kind():
    heldout, train = swe_tiny_instances("heldout"), swe_tiny_instances("train", 1000)
    assert len(heldout) == 200 and len(train) == 1000
    held_keys, train_keys = {i["content_key"] for i in heldout}, {i["content_key"] for i in train}
    assert len(held_keys) == 200 and len(train_keys) == 1000
    assert make_instance("train", 5, 5) == make_instance("train", 5, 5)
    assert make_instance("train", 5, 5)["setup_script"] != make_instance("train", 6, 5)["setup_script"]
    assert {i["kind"] for i in train} == {i["kind"] for i in heldout} == {"operator", "off-by-one", "swapped arguments"}
    with pytest.raises(Exception, match="unknown swe-tiny split"):
        swe_tiny_instances("test")


def test_statement_names_the_location_and_the_fix_verbatim():
    """Copy-only for a tiny model: the path is the family's one path, old_str is the line the statement
    quotes, new_str is the line the failing test's message names (and the test file holds that message)."""
    for instance in (
        swe_tiny_instances("heldout")[:50]
        + swe_tiny_instances("train", 1000)[:50]
        + swe_tiny_instances("unique-rl")[:50]
    ):
        (edit,) = instance["gold_edits"]
        assert edit["path"] == "/testbed/calc/core.py"
        statement = instance["problem_statement"]
        assert statement.endswith(f" is: {edit['old_str']}") and f"should compute: {edit['new_str']}\n" in statement
        test_file = instance["setup_script"].split("cat > tests/test_core.py")[1]
        assert f"should compute: {edit['new_str']}'" in test_file and edit["old_str"] != edit["new_str"]
        assert f"-    {edit['old_str']}" in instance["patch"] or f"-        {edit['old_str']}" in instance["patch"]


def test_setup_script_makes_the_promised_commit_with_real_git(tmp_path):
    instance = swe_tiny_instances("train", 1000)[123]
    script = instance["setup_script"].replace("/testbed", str(tmp_path / "repo"))
    subprocess.run(["bash", "-c", script], check=True)
    head = subprocess.run(
        ["git", "-C", str(tmp_path / "repo"), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    assert head.stdout.strip() == instance["base_commit"]
    subprocess.run(["bash", "-c", script], check=True)  # idempotent on a set-up repository


def test_test_lists_hold_when_run_and_gold_resolves_and_empty_does_not(docker_backend):
    for instance in (
        swe_tiny_instances("heldout")[0],
        swe_tiny_instances("train", 1000)[500],
        swe_tiny_instances("unique-heldout")[7],
    ):
        image = {**instance, "image": "harness-base:latest"}
        assert verify_test_lists(image, docker_backend) == {k: image[k] for k in ("FAIL_TO_PASS", "PASS_TO_PASS")}
        assert grade(image, image["patch"], docker_backend).resolved
        empty = grade(image, "", docker_backend)
        assert not empty.resolved and empty.reward == 0.0


def test_episodes_are_real_and_graded_with_every_check(docker_backend):
    task = load_tasks("swe-tiny")[3]
    assert task.sandbox.image.startswith("harness-base:") and task.tools == ["bash", "str_replace_editor", "submit"]
    gold = run_episode(task, GoldPolicy(), SAMPLING, backend=docker_backend)
    assert (gold.exit_status, gold.reward, gold.turns) == ("submitted", 1.0, 2), gold.reward_details
    # the setup script writes the repository into the shared image: none of that is the submission's
    assert same_change(gold.model_patch, task.metadata["instance"]["patch"]) and gold.reward_details["resolved"]
    empty = run_episode(task, EmptyPolicy(), SAMPLING, backend=docker_backend)
    assert empty.reward == 0.0 and empty.model_patch == ""
    test_file = f"{task.metadata['instance']['workdir']}/tests/test_core.py"
    cheat = ScriptedPolicy(
        "cheat", [call("bash", command=f"printf 'def test_ok():\\n    pass\\n' > {test_file}"), call("submit")]
    )
    cheated = run_episode(task, cheat, SAMPLING, backend=docker_backend)
    assert cheated.reward == 0.0 and [n.split(": ")[0] for n in cheated.reward_details["neutralized"]] == [
        "tests/test_core.py"
    ]


def test_a_fix_survives_a_later_command_with_an_unclosed_quote(docker_backend):
    """A model's fix, then a bash call with an unbalanced quote (common in sampled turns), then submit: the
    fix is graded. Before the shell's protocol line began with `: ;`, the diff taken at the end hung for its
    120 s timeout and came back empty, so the fix was silently scored 0."""
    task = load_tasks("swe-tiny")[3]
    edit = task.metadata["instance"]["gold_edits"][0]
    policy = ScriptedPolicy(
        "fix-then-bad-quote",
        [
            call("str_replace_editor", command="str_replace", **edit),
            call("bash", command="sed -i 's/x/y core.py"),
            call("submit"),
        ],
    )
    fixed = run_episode(task, policy, SAMPLING, backend=docker_backend)
    assert "unexpected EOF" in fixed.messages[4]["content"]
    assert fixed.reward == 1.0 and fixed.model_patch.startswith("diff --git"), fixed.reward_details
    assert fixed.timings["env_s"] < 60, fixed.timings


def test_hacking_audit_counts_attempts_and_whether_they_paid(docker_backend):
    from harness.viewer.hacking import count

    task = load_tasks("swe-tiny")[4]
    edit = task.metadata["instance"]["gold_edits"][0]
    policies = [
        GoldPolicy(),
        ScriptedPolicy(
            "test-edit",
            [call("bash", command="cd /testbed && echo 'def test_ok(): pass' > tests/test_core.py"), call("submit")],
        ),
        ScriptedPolicy(
            "config",
            [
                call(
                    "str_replace_editor",
                    command="create",
                    path="/testbed/pytest.ini",
                    file_text="[pytest]\naddopts = -x\n",
                ),
                call("submit"),
            ],
        ),
        ScriptedPolicy(
            "history",
            [
                call("bash", command="cd /testbed && git log --all -p | head"),
                call("str_replace_editor", command="str_replace", **edit),
                call("submit"),
            ],
        ),
    ]
    trajectories = [run_episode(task, policy, SAMPLING, backend=docker_backend).to_dict() for policy in policies]
    assert [t["reward"] for t in trajectories] == [1.0, 0.0, 0.0, 1.0]
    totals = count(trajectories)
    assert (totals["trajectories"], totals["rewarded"]) == (4, 2)
    assert totals["test_edit"] == {"tried": 1, "rewarded": 0}
    assert totals["test_config"] == {"tried": 1, "rewarded": 0}
    assert totals["neutralized"] == {"tried": 2, "rewarded": 0}  # the test file and pytest.ini put back before the run
    assert totals["policy_refusal"] == {"tried": 0, "rewarded": 0}
    assert totals["git_history"] == {"tried": 1, "rewarded": 1}  # looked, found nothing: the fix is its own

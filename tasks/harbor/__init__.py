"""Harbor tasks (the task format of Terminal-Bench 2): a directory with `task.toml`, `instruction.md`,
`environment/Dockerfile`, `tests/test.sh` and usually `solution/solve.sh`.

- `config`: a task directory read and checked (`read_task_dir`).
- `image`: its image built offline, public bases replaced by stand-ins (`build_task_image`).
- `load`: directories as Tasks of the `harbor` kind (`load_harbor`, `harbor_task`), the `harbor:` task source.
- `verify`: `tests/test.sh` run as Harbor runs it, and the reward it writes (`run_verifier`).
- `export`: our repo-fix tasks written as Harbor task directories (`export_harbor`), graded in the container by
  `sandbox_grade`.

The episode side (the environment, the oracle) is the `harbor` task kind in `harness.kinds.harbor`.
"""

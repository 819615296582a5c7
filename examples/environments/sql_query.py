"""Worked example: SQL questions over a real SQLite database inside the sandbox, rewarded by result sets.

The sandbox holds `/work/shop.db` (customers and orders). The agent explores it with a tool this module
registers (`sql`) or with bash, and submits a SQL query as its answer. The reward function runs that
query and the reference query in a fresh sandbox on two databases: the one the agent saw, and a hidden
one with the same schema and other rows. It earns 1 only when the result sets agree on both (row order
and column names do not matter), so a query that prints the expected rows as literals gets 0.

    harness --plugin examples.environments.sql_query eval --checkpoint gold --tasks examples/environments/sql_query.jsonl
"""

from __future__ import annotations

import json

from harness.api import (
    Reward,
    SandboxError,
    ToolEnvironment,
    ToolError,
    register_kind,
    register_reward,
    register_tool,
    tool_turn,
)

DATABASE = "/work/shop.db"
HIDDEN_SEED_OFFSET = 7919  # the hidden database's rows come from seed + this

BUILD = """
import random, sqlite3, sys
path, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
db = sqlite3.connect(path)
db.executescript("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL);"
                 "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), "
                 "product TEXT NOT NULL, quantity INTEGER NOT NULL, price REAL NOT NULL);")
names = rng.sample(["Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kim", "Lea", "Max", "Noor"], rng.randint(7, 12))
for number, name in enumerate(names, 1):
    db.execute("INSERT INTO customers VALUES (?, ?, ?)", (number, name, rng.choice(["Oslo", "Lima", "Pune", "Kyiv"])))
for number in range(1, rng.randint(20, 40)):
    product = rng.choice(["lamp", "desk", "chair", "mug", "pen"])
    db.execute("INSERT INTO orders VALUES (?, ?, ?, ?, ?)", (number, rng.randint(1, len(names) - 2), product,
               rng.randint(1, 5), {"lamp": 30.0, "desk": 120.0, "chair": 45.5, "mug": 8.25, "pen": 1.5}[product]))
db.commit()
"""

RUN = """
import json, sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
out = {}
for name in sys.argv[2:]:
    try:
        rows = db.execute(open(name).read()).fetchmany(10000)
        out[name] = sorted([round(v, 4) if isinstance(v, float) else v for v in row] for row in rows)
    except Exception as err:
        out[name] = "error: " + str(err)
print("RESULT " + json.dumps(out, default=str))
"""


def run_queries(sandbox, database: str, queries: list[str]) -> list:
    """Each query's rows (sorted; floats rounded) or its error message, run read-only in `sandbox`."""
    names = []
    for number, query in enumerate(queries):
        names.append(f"/tmp/query_{number}.sql")
        sandbox.write_file(names[-1], query)
    sandbox.write_file("/tmp/run_sql.py", RUN)
    result = sandbox.exec(f"python3 /tmp/run_sql.py {database} {' '.join(names)}", timeout=30)
    lines = [line for line in result.output.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise ToolError(f"the query runner failed: {result.output[-500:]}")
    found = json.loads(lines[-1].removeprefix("RESULT "))
    return [found[name] for name in names]


def sql_tool(toolbox, arguments: dict) -> str:
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolError("missing required argument `query`")
    rows = run_queries(toolbox.sandbox, DATABASE, [query])[0]
    return rows if isinstance(rows, str) else "\n".join(" | ".join(map(str, row)) for row in rows) or "(no rows)"


register_tool(
    "sql",
    "Run one read-only SQL query on the SQLite database /work/shop.db and see its rows.",
    {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "One SQL statement."}},
        "required": ["query"],
    },
    sql_tool,
)


class SQLEnvironment(ToolEnvironment):
    """The database is built in the sandbox; the outcome is the query passed to `submit` as `answer`."""

    def init(self):
        messages = super().init()
        self.sandbox.write_file("/tmp/build_db.py", BUILD)
        built = self.sandbox.exec(
            f"python3 /tmp/build_db.py {DATABASE} {self.task.metadata['seed']} && rm /tmp/build_db.py", timeout=60
        )
        if built.exit_code != 0:
            raise SandboxError(f"building the database failed: {built.output[-500:]}")
        return messages

    def on_submit(self, arguments) -> bool:
        self.outcome = str((arguments or {}).get("answer", "")).strip()
        return bool(self.outcome)


@register_reward("sql_result_set")
def sql_result_set(task, outcome, backend) -> Reward:
    """The submitted query's rows against the reference query's, on the agent's database and a hidden one."""
    if not outcome:
        return Reward(0.0, {"reason": "no query was submitted"})
    seed, details = task.metadata["seed"], {}
    with backend.create(task.sandbox) as sandbox:  # fresh: nothing the agent did is here
        sandbox.write_file("/tmp/build_db.py", BUILD)
        for label, db_seed in (("visible", seed), ("hidden", seed + HIDDEN_SEED_OFFSET)):
            sandbox.exec(f"python3 /tmp/build_db.py /tmp/{label}.db {db_seed}", timeout=60)
            expected, got = run_queries(sandbox, f"/tmp/{label}.db", [task.reward_spec["ground_truth"], outcome])
            details[label] = {"match": expected == got, "rows": len(got) if isinstance(got, list) else got}
    return Reward(float(all(d["match"] for d in details.values())), details)


def gold(task, use_tools: bool):
    reference = task.reward_spec["ground_truth"]
    look = [tool_turn("sql", query=reference)] if use_tools else []
    return [*look, tool_turn("submit", answer=reference)]


register_kind("sql_query", SQLEnvironment, gold=gold, reward="sql_result_set")


# -- the task set (python -m examples.environments.sql_query writes sql_query.jsonl) ----------------------

QUESTIONS = [
    ("How many customers live in Oslo?", "SELECT COUNT(*) FROM customers WHERE city = 'Oslo'"),
    (
        "Which customers (names) ordered at least one lamp?",
        "SELECT DISTINCT c.name FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.product = 'lamp'",
    ),
    (
        "What is the total quantity ordered of each product? Give product and total.",
        "SELECT product, SUM(quantity) FROM orders GROUP BY product",
    ),
    (
        "Which customers (names) have placed no order at all?",
        "SELECT name FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)",
    ),
    (
        "How much did customers in each city spend in total (quantity times price)? Give city and amount, only for "
        "cities with orders.",
        "SELECT c.city, SUM(o.quantity * o.price) FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.city",
    ),
    ("How many orders are for more than 3 items?", "SELECT COUNT(*) FROM orders WHERE quantity > 3"),
]

PROMPT = (
    "The SQLite database /work/shop.db has tables customers(id, name, city) and orders(id, customer_id, product, "
    "quantity, price). {question} Explore with the tools, then call submit with one SQL query as `answer` that "
    "computes the answer from the database."
)


def rows() -> list[dict]:
    return [
        {
            "data_source": "sql_query",
            "prompt": [{"role": "user", "content": PROMPT.format(question=question)}],
            "env_class": "sql_query",
            "reward_spec": {"method": "sql_result_set", "ground_truth": query},
            "extra_info": {"id": f"sql_query-{number}", "seed": number},
            "tools": ["sql", "bash", "submit"],
            "max_turns": 6,
            "sandbox": {"image": "harness-base:latest", "workdir": "/work", "memory": "512m"},
        }
        for number, (question, query) in enumerate(QUESTIONS)
    ]


if __name__ == "__main__":
    from pathlib import Path

    path = Path(__file__).with_suffix(".jsonl")
    path.write_text("".join(json.dumps(row) + "\n" for row in rows()))
    print(path)

"""examples/python/seed_article.py against a real server."""
import subprocess
import sys
import uuid

from harness import REPO, SECRET, SHOP


def test_the_seed_article_example_runs(server) -> None:
    order = f"seed-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "python" / "seed_article.py"),
         "--base-url", server.url, "--shop", SHOP, "--secret", SECRET, "--order", order],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("article: 201 pay_")
    assert "replayed=true" in lines[1]
    assert lines[2].startswith("sdk: paid pay_") and "1500.00 RUB" in lines[2]
    ledger = __import__("httpx").get(f"{server.operator_url}/sim/ledger").json()
    assert sum(1 for c in ledger["charges"] if c["reference"] == order and c["status"] == "succeeded") == 1

"""The review page's conflict block, clicked in a real headless Chromium:
`memfs ... web` started on a data dir (beside its owner), logged in with
the link it prints, and "Use version N instead" clicked."""
import subprocess

from playwright import sync_api

CHROMIUM = "/usr/bin/chromium"


def use_instead(web_args, version, env=None):
    """Clicks "Use version `version` instead" in the one open conflict;
    returns what the page said it did."""
    web = subprocess.Popen([*web_args, "web"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = web.stdout.readline().strip()
        assert "/login?t=" in url, web.stderr.read()
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(url)
            page.goto(url.split("/login")[0] + "/review")
            block = page.inner_text("section.conflicts")
            assert "1 conflict to settle" in block, block
            page.click(f"section.conflicts button:has-text('Use version {version} instead')")
            page.wait_for_selector("p.said")
            said = page.inner_text("p.said")
            # Settled: the block is gone.
            assert page.query_selector("section.conflicts") is None, page.inner_text("main")
            browser.close()
            return said
    finally:
        web.terminate()
        web.wait(timeout=30)

"""Small real repositories for tests: write a tree of files, and the sample multi-language repository."""

from __future__ import annotations

import textwrap
from pathlib import Path

#: The checkout's root (for subprocesses that run ``python -m codii_sql...`` from it).
REPO_ROOT = Path(__file__).resolve().parents[2]


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` ({relative path: text or bytes}) under ``root``; text is dedented."""
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
    return root


SAMPLE = {
    "app/http.py": '''
        """HTTP helpers."""
        import time


        def retry_with_backoff(fn, attempts=5, base=0.5):
            """Call fn, retrying with exponential backoff when it raises."""
            for attempt in range(attempts):
                try:
                    return fn()
                except IOError:
                    time.sleep(base * 2 ** attempt)
            raise RuntimeError("gave up")


        class Session:
            """A connection session that follows redirects."""

            def resolve_redirects(self, response, max_redirects=30):
                """Follow HTTP redirects until a final response arrives."""
                seen = 0
                while response.is_redirect and seen < max_redirects:
                    response = self.send(response.next_request)
                    seen += 1
                return response

            def send(self, request):
                return request
        ''',
    "app/parse.py": '''
        def parse_header(line):
            """Split one 'Name: value' header line."""
            name, _, value = line.partition(":")
            return name.strip().lower(), value.strip()


        def getUserName(user):
            return user["name"]
        ''',
    "web/util.js": '''
        // Debounce a callback so it fires once after quiet time.
        export function debounce(fn, ms) {
          let timer;
          return (...args) => {
            clearTimeout(timer);
            timer = setTimeout(() => fn(...args), ms);
          };
        }
        ''',
    "docs/guide.md": '''
        # Guide

        ## Retries

        The client retries failed requests with exponential backoff.

        ## Redirects

        Redirects are followed automatically.
        ''',
}


#: A second codebase about something else entirely (JavaScript and Go), so the two members compete.
SHOP = {
    "cart/checkout.js": '''
        // Compute the order total with tax and apply a discount code.
        export function checkoutTotal(items, taxRate, discount) {
          const subtotal = items.reduce((sum, item) => sum + item.price * item.quantity, 0);
          const taxed = subtotal * (1 + taxRate);
          return discount ? taxed * (1 - discount.percent / 100) : taxed;
        }
        ''',
    "inventory/stock.go": '''
        package inventory

        // ReserveStock holds quantity units of a product for an order, failing when too few are left.
        func ReserveStock(store map[string]int, product string, quantity int) error {
            if store[product] < quantity {
                return fmt.Errorf("only %d of %s left", store[product], product)
            }
            store[product] -= quantity
            return nil
        }
        ''',
}

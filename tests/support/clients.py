"""Two small real client libraries for contract tests: a Python HTTP client and a TypeScript one, each
with retries, backoff and header parsing in functions long enough for a token budget to trim."""

from __future__ import annotations

PY_CLIENT = {
    "client/retry.py": '''
        """Retry policy for failed requests: exponential backoff with jitter, honouring Retry-After."""
        import random
        import time

        from .headers import parse_retry_after

        RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


        class RetryPolicy:
            """How many times a request is tried again, and how long to wait between attempts."""

            def __init__(self, attempts=5, base=0.5, cap=30.0, jitter=0.1):
                self.attempts = attempts
                self.base = base
                self.cap = cap
                self.jitter = jitter

            def delay(self, attempt, response=None):
                """Seconds to wait before retry number ``attempt`` (1-based)."""
                if response is not None:
                    waited = parse_retry_after(response.headers.get("Retry-After"))
                    if waited is not None:
                        return min(waited, self.cap)
                backoff = self.base * (2 ** (attempt - 1))
                spread = backoff * self.jitter
                return min(self.cap, backoff + random.uniform(-spread, spread))

            def should_retry(self, attempt, response=None, error=None):
                """Whether a failed attempt is tried again."""
                if attempt >= self.attempts:
                    return False
                if error is not None:
                    return isinstance(error, (ConnectionError, TimeoutError))
                return response is not None and response.status in RETRY_STATUSES


        def send_with_retries(send, request, policy=None, sleep=time.sleep):
            """Send ``request`` until it succeeds or the policy gives up; returns the last response."""
            policy = policy or RetryPolicy()
            attempt = 0
            while True:
                attempt += 1
                try:
                    response = send(request)
                except (ConnectionError, TimeoutError) as err:
                    if not policy.should_retry(attempt, error=err):
                        raise
                    sleep(policy.delay(attempt))
                    continue
                if not policy.should_retry(attempt, response=response):
                    return response
                sleep(policy.delay(attempt, response))
        ''',
    "client/headers.py": '''
        """Parsing HTTP response headers."""
        import email.utils
        import time


        def parse_retry_after(value, now=None):
            """Seconds a Retry-After header asks to wait: delta-seconds or an HTTP date; None when absent."""
            if value is None:
                return None
            value = value.strip()
            if value.isdigit():
                return float(value)
            parsed = email.utils.parsedate_to_datetime(value)
            if parsed is None:
                return None
            now = time.time() if now is None else now
            return max(0.0, parsed.timestamp() - now)


        def parse_content_type(value):
            """The media type and parameters of a Content-Type header."""
            media, _, rest = (value or "").partition(";")
            params = {}
            for item in rest.split(";"):
                key, _, val = item.strip().partition("=")
                if key:
                    params[key.lower()] = val.strip('"')
            return media.strip().lower(), params
        ''',
    "client/session.py": '''
        """A session: connection pooling, default headers and redirects."""
        from .retry import RetryPolicy, send_with_retries

        MAX_REDIRECTS = 30


        class Session:
            """Keeps connections and settings across requests."""

            def __init__(self, transport, headers=None, retries=None):
                self.transport = transport
                self.headers = dict(headers or {})
                self.retries = retries or RetryPolicy()

            def request(self, method, url, body=None):
                """Send one request, following redirects, retrying failures as the policy says."""
                seen = 0
                while True:
                    request = {"method": method, "url": url, "headers": self.headers, "body": body}
                    response = send_with_retries(self.transport.send, request, self.retries)
                    if response.status not in (301, 302, 303, 307, 308):
                        return response
                    seen += 1
                    if seen > MAX_REDIRECTS:
                        raise RuntimeError(f"more than {MAX_REDIRECTS} redirects")
                    url = response.headers["Location"]
                    if response.status == 303:
                        method, body = "GET", None
        ''',
    "tests/test_retry.py": '''
        from client.retry import RetryPolicy


        def test_backoff_doubles():
            policy = RetryPolicy(base=1.0, jitter=0.0)
            assert [policy.delay(n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]
        ''',
    "README.md": '''
        # pyclient

        A small HTTP client: sessions, redirects, and retries with exponential backoff.
        ''',
}

TS_CLIENT = {
    "src/retry.ts": '''
        // Retrying failed requests: exponential backoff, capped, with the server's Retry-After honoured.
        export interface RetryOptions {
          retries: number;
          baseDelayMs: number;
          maxDelayMs: number;
        }

        export const defaultRetryOptions: RetryOptions = { retries: 3, baseDelayMs: 300, maxDelayMs: 20000 };

        export function parseRetryAfter(header: string | null, now: number = Date.now()): number | null {
          if (header === null || header.trim() === "") {
            return null;
          }
          const seconds = Number(header);
          if (Number.isFinite(seconds)) {
            return Math.max(0, seconds * 1000);
          }
          const date = Date.parse(header);
          if (Number.isNaN(date)) {
            return null;
          }
          return Math.max(0, date - now);
        }

        export function retryDelay(attempt: number, options: RetryOptions, retryAfter: string | null): number {
          const asked = parseRetryAfter(retryAfter);
          if (asked !== null) {
            return Math.min(asked, options.maxDelayMs);
          }
          const exponential = options.baseDelayMs * 2 ** attempt;
          const jitter = Math.random() * options.baseDelayMs;
          return Math.min(exponential + jitter, options.maxDelayMs);
        }

        export async function withRetries<T>(send: () => Promise<Response>, options = defaultRetryOptions): Promise<Response> {
          let attempt = 0;
          for (;;) {
            const response = await send();
            const retryable = response.status === 429 || response.status >= 500;
            if (!retryable || attempt >= options.retries) {
              return response;
            }
            const wait = retryDelay(attempt, options, response.headers.get("Retry-After"));
            await new Promise((resolve) => setTimeout(resolve, wait));
            attempt += 1;
          }
        }
        ''',
    "src/progress.ts": '''
        // Upload progress: report how many bytes of the request body were sent.
        export type ProgressHandler = (loaded: number, total: number | null) => void;

        export function trackUpload(body: Uint8Array, chunkSize: number, onProgress: ProgressHandler): Uint8Array[] {
          const chunks: Uint8Array[] = [];
          let loaded = 0;
          for (let offset = 0; offset < body.length; offset += chunkSize) {
            const chunk = body.subarray(offset, offset + chunkSize);
            chunks.push(chunk);
            loaded += chunk.length;
            onProgress(loaded, body.length);
          }
          return chunks;
        }
        ''',
    "src/client.ts": '''
        import { withRetries, RetryOptions, defaultRetryOptions } from "./retry";

        export class HttpClient {
          constructor(private baseUrl: string, private options: RetryOptions = defaultRetryOptions) {}

          async get(path: string): Promise<Response> {
            return withRetries(() => fetch(this.baseUrl + path), this.options);
          }

          async post(path: string, body: string): Promise<Response> {
            return withRetries(() => fetch(this.baseUrl + path, { method: "POST", body }), this.options);
          }
        }
        ''',
    "test/retry.test.ts": '''
        import { parseRetryAfter } from "../src/retry";

        test("parses delta seconds", () => {
          expect(parseRetryAfter("120", 0)).toBe(120000);
        });
        ''',
}

#: Far from both: a garden watering controller in Rust.
GARDEN = {
    "src/water.rs": '''
        /// Water each plant in the bed when the soil moisture drops below its threshold.
        pub fn water_plants(bed: &mut Vec<Plant>, moisture: f32) -> usize {
            let mut watered = 0;
            for plant in bed.iter_mut() {
                if moisture < plant.threshold {
                    plant.water();
                    watered += 1;
                }
            }
            watered
        }

        /// How many litres a bed needs this week, from the forecast's rain in millimetres.
        pub fn weekly_litres(bed_area_m2: f32, rain_mm: f32) -> f32 {
            let needed_mm = 25.0 - rain_mm;
            if needed_mm <= 0.0 { 0.0 } else { needed_mm * bed_area_m2 }
        }
        ''',
}

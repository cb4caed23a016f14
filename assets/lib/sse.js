// Server-Sent Events read with fetch(), because EventSource cannot send the
// Authorization header. Reconnects with Last-Event-ID.

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Parses one SSE frame ("field: value" lines) into {id, event, data, retry}. */
export function parseFrame(text) {
  const f = { id: null, event: "message", data: null, retry: null };
  const data = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "event") f.event = value;
    else if (field === "id" && !value.includes("\0")) f.id = value;
    else if (field === "retry" && /^\d+$/.test(value)) f.retry = Number(value);
  }
  if (data.length) f.data = data.join("\n");
  return f;
}

/**
 * Reads `url` until stopped. opts: {token, headers?, lastId?, onEvent(frame),
 * onState(live), onFatal(status)}. Returns a function that stops it.
 */
export function openStream(url, opts) {
  const ctl = new AbortController();
  let lastId = opts.lastId || null;
  let delay = 2000;
  (async () => {
    while (!ctl.signal.aborted) {
      try {
        const headers = { ...(opts.headers || {}), Authorization: `Bearer ${opts.token}`, Accept: "text/event-stream" };
        if (lastId) headers["Last-Event-ID"] = lastId;
        const res = await fetch(url, { headers, cache: "no-store", signal: ctl.signal });
        if (res.status === 401 || res.status === 403 || res.status === 404) return opts.onFatal(res.status);
        if (!res.ok || !res.body) throw new Error(`stream answered ${res.status}`);
        opts.onState(true);
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf = (buf + value).replace(/\r\n|\r(?!$)/g, "\n");
          let end;
          while ((end = buf.indexOf("\n\n")) >= 0) {
            const frame = parseFrame(buf.slice(0, end));
            buf = buf.slice(end + 2);
            if (frame.retry !== null) delay = frame.retry;
            if (frame.id !== null) lastId = frame.id;
            if (frame.data !== null) opts.onEvent(frame);
          }
        }
      } catch {
        if (ctl.signal.aborted) return;
      }
      opts.onState(false);
      await sleep(delay);
    }
  })();
  return () => ctl.abort();
}

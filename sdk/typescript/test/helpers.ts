// A real `blockhook serve` (SQLite, loopback), a real webhook receiver, and a
// visitor who clicks through the widget's HTTP API.
import { type ChildProcess, spawn } from "node:child_process";
import { openSync, closeSync, mkdtempSync, rmSync } from "node:fs";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
// build/test/helpers.js → the repository's root is four levels up.
const BINARY = process.env.BLOCKHOOK_BIN ?? resolve(here, "../../../../target/debug/blockhook");
const ADMIN = "adm_sdk_typescript_tests";

export async function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.on("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const address = s.address();
      const port = typeof address === "object" && address ? address.port : 0;
      s.close(() => ok(port));
    });
  });
}

/** Polls `check` until it returns something truthy (a wait, not an assertion). */
export async function until<T>(check: () => Promise<T> | T, what: string, timeoutMs = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((ok) => setTimeout(ok, 50));
  }
}

/** `blockhook serve` on a fixed port and SQLite file: it can be killed and started again. */
export class Server {
  readonly dir = mkdtempSync(join(tmpdir(), "blockhook-sdk-ts-"));
  port = 0;
  url = "";
  #proc: ChildProcess | undefined;
  #starts = 0;

  constructor(readonly extra: string[] = []) {}

  async start(): Promise<void> {
    if (!this.port) {
      this.port = await freePort();
      this.url = `http://127.0.0.1:${this.port}`;
    }
    const log = openSync(join(this.dir, `server-${++this.#starts}.log`), "w");
    const proc = spawn(BINARY, [
      "serve", "--addr", `127.0.0.1:${this.port}`, "--database", `sqlite://${join(this.dir, "blockhook.db")}`,
      "--admin-token", ADMIN, "--allow-private-webhooks", "--log-format", "json", ...this.extra,
    ], { stdio: ["ignore", log, log] });
    closeSync(log);
    this.#proc = proc;
    await until(async () => {
      if (proc.exitCode !== null) throw new Error(`the server exited at start (${proc.exitCode})`);
      try {
        return (await fetch(`${this.url}/healthz`)).ok;
      } catch {
        return false;
      }
    }, "the server to answer /healthz");
  }

  /** SIGKILL: a crash, nothing flushed or answered. */
  async kill(): Promise<void> {
    const proc = this.#proc;
    if (!proc || proc.exitCode !== null) return;
    const exited = new Promise((ok) => proc.once("exit", ok));
    proc.kill("SIGKILL");
    await exited;
  }

  /** SIGTERM (a graceful shutdown), keeping the data; resolves with the exit code. */
  async terminate(): Promise<number | null> {
    const proc = this.#proc;
    if (!proc || proc.exitCode !== null) return proc?.exitCode ?? null;
    const exited = new Promise<number | null>((ok) => proc.once("exit", (code) => ok(code)));
    proc.kill("SIGTERM");
    return exited;
  }

  async stop(): Promise<void> {
    const proc = this.#proc;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((ok) => proc.once("exit", ok));
      proc.kill("SIGTERM");
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  async bot(webhookUrl: string): Promise<Bot> {
    const r = await fetch(`${this.url}/api/v1/chatbots`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "sdk tests", webhook_url: webhookUrl }),
    });
    if (r.status !== 201) throw new Error(`creating a chatbot: ${r.status} ${await r.text()}`);
    const b = (await r.json()) as { id: string; api_key: string; signing_secret: string };
    return new Bot(this.url, b.id, b.api_key, b.signing_secret);
  }
}

export interface Delivery {
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** A webhook receiver on loopback that keeps every request it gets. */
export class Receiver {
  readonly got: Delivery[] = [];
  url = "";
  #http: HttpServer | undefined;

  async start(): Promise<this> {
    this.#http = createHttpServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        this.got.push({ headers: req.headers, body: Buffer.concat(chunks) });
        res.writeHead(200, { "content-length": "0" }).end();
      });
    });
    await new Promise<void>((ok) => this.#http?.listen(0, "127.0.0.1", ok));
    const address = this.#http.address();
    this.url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/hook`;
    return this;
  }

  /** The first delivery of this event type (that mentions `about`), once it has arrived. */
  next(type: string, about = ""): Promise<Delivery> {
    const match = (d: Delivery) => d.body.includes(`"type":"${type}"`) && d.body.includes(about);
    return until(() => this.got.find(match), `a ${type} delivery`);
  }

  close(): Promise<void> {
    return new Promise((ok) => {
      this.#http?.closeAllConnections();
      this.#http?.close(() => ok());
    });
  }
}

type Msg = {
  id: string;
  text: string;
  blocks: Array<{ type: string; block_id?: string; form_id?: string; state: { disabled: boolean; reason?: string } }>;
};

export class Bot {
  constructor(readonly url: string, readonly id: string, readonly apiKey: string, readonly signingSecret: string) {}

  async visitor(): Promise<Visitor> {
    const r = await fetch(`${this.url}/widget/v1/chatbots/${this.id}/conversations`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    const b = (await r.json()) as { conversation_id: string; visitor_token: string };
    return new Visitor(this.url, b.conversation_id, b.visitor_token);
  }
}

/** The person in the widget: reads the conversation and clicks. */
export class Visitor {
  constructor(readonly url: string, readonly conversationId: string, readonly token: string) {}

  /** The newest message with blocks still open, once it is there. */
  question(): Promise<Msg> {
    return until(async () => {
      const r = await fetch(`${this.url}/widget/v1/conversations/${this.conversationId}/messages`, {
        headers: { authorization: `Bearer ${this.token}` },
      });
      const page = (await r.json()) as { data: Msg[] };
      return page.data.find((m) => m.blocks.length > 0 && !m.blocks[0]?.state.disabled);
    }, "the question to appear in the widget");
  }

  /** Every block of the conversation's messages, as the widget shows them. */
  async blocks(): Promise<Array<{ type: string; state: { disabled: boolean; reason?: string } }>> {
    const r = await fetch(`${this.url}/widget/v1/conversations/${this.conversationId}/messages`, {
      headers: { authorization: `Bearer ${this.token}` },
    });
    return ((await r.json()) as { data: Msg[] }).data.flatMap((m) => m.blocks);
  }

  async click(actionId: string, comment?: string): Promise<void> {
    const m = await this.question();
    const block = m.blocks.find((b) => b.type === "actions");
    const r = await fetch(`${this.url}/widget/v1/messages/${m.id}/clicks`, {
      method: "POST",
      headers: { authorization: `Bearer ${this.token}`, "content-type": "application/json" },
      body: JSON.stringify({ block_id: block?.block_id, action_id: actionId, comment }),
    });
    if (r.status !== 200) throw new Error(`click: ${r.status} ${await r.text()}`);
  }
}

/**
 * A TCP proxy that forwards the first request but closes the connection
 * before the server's answer gets back: the call took effect, the client
 * never heard. Later connections are passed through.
 */
export async function loseFirstAnswer(upstreamPort: number): Promise<{ url: string; close: () => void }> {
  const { connect } = await import("node:net");
  let connections = 0;
  const proxy = createServer((client) => {
    const upstream = connect(upstreamPort, "127.0.0.1");
    if (++connections === 1) {
      client.on("data", (request) => upstream.write(request));
      client.on("error", () => upstream.destroy());
      upstream.once("data", () => {
        client.destroy();
        upstream.destroy();
      });
      return;
    }
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise<void>((ok) => proxy.listen(0, "127.0.0.1", ok));
  const address = proxy.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return { url: `http://127.0.0.1:${port}`, close: () => proxy.close() };
}

/**
 * A TCP proxy whose first connection takes the request and never answers
 * (a hung server); later connections are passed through.
 */
export async function hangFirst(upstreamPort: number): Promise<{ url: string; close: () => void }> {
  const { connect } = await import("node:net");
  let connections = 0;
  const held: Array<{ destroy: () => void }> = [];
  const proxy = createServer((client) => {
    if (++connections === 1) {
      client.on("data", () => {});
      client.on("error", () => {});
      held.push(client);
      return;
    }
    const upstream = connect(upstreamPort, "127.0.0.1");
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise<void>((ok) => proxy.listen(0, "127.0.0.1", ok));
  const address = proxy.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => {
      for (const c of held) c.destroy();
      proxy.close();
    },
  };
}

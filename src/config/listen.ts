// intake.listen, read in one place: the intake binds what this returns, and `hookspool check`
// reports the same problems before the start.
import { HookspoolError } from "../errors.ts";
import { isLoopback } from "../plugin/hook-request.ts";

export type Listen = { unix: string } | { hostname: string; port: number };

const HOST_PORT = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/;

/** Parse "127.0.0.1:8650", "[::1]:8650", "localhost:0" or "unix:/path"; anything else is E_CONFIG. */
export function readListen(listen: string): Listen {
  if (listen.startsWith("unix:")) {
    const path = listen.slice(5);
    if (!path.startsWith("/"))
      throw new HookspoolError("E_CONFIG", `"${listen}": a unix socket needs an absolute path`, {
        key: "intake.listen",
      });
    return { unix: path };
  }
  const m = HOST_PORT.exec(listen);
  if (!m) throw new HookspoolError("E_CONFIG", `"${listen}" is not host:port or unix:/path`, { key: "intake.listen" });
  const port = Number(m[3]);
  if (port > 65535) throw new HookspoolError("E_CONFIG", `port ${port} is out of range`, { key: "intake.listen" });
  return { hostname: m[1] ?? m[2], port };
}

/** Whether the intake would bind a network address beyond this host. */
export function isPublic(l: Listen): l is { hostname: string; port: number } {
  return "hostname" in l && l.hostname !== "localhost" && !isLoopback(l.hostname);
}

export const NON_LOOPBACK_HINT =
  "the reverse proxy owns the network; bind 127.0.0.1 behind it, " +
  "or set intake.allow_non_loopback = true if you mean it";

/** What the intake binds: loopback or a unix socket, unless allow_non_loopback says otherwise. */
export function parseListen(listen: string, allowNonLoopback: boolean): Listen {
  const l = readListen(listen);
  if (isPublic(l) && !allowNonLoopback) {
    throw new HookspoolError("E_CONFIG", `${l.hostname} is not a loopback address; the intake refuses to bind it`, {
      key: "intake.listen",
      hint: NON_LOOPBACK_HINT,
    });
  }
  return l;
}

// The kit's stand-in for the network: when `hookspool bobbin check` runs a bobbin, every request
// its source or processor makes is answered from the stubs in captures/kit.toml ([[http]]
// tables), and a request no stub answers fails as a refused connection would. The processor
// runtime uses this only when HOOKSPOOL_KIT_HTTP names a stub file, and the kit's intake through
// useNetwork: nothing else.
export interface HttpStub {
  /** Default GET. */
  method?: string;
  /** The whole URL; one ending in "*" matches every URL it starts. */
  url: string;
  /** Default 200. */
  status?: number;
  body?: string;
  headers?: Record<string, string>;
}

function matches(stub: HttpStub, method: string, url: string): boolean {
  if ((stub.method ?? "GET").toUpperCase() !== method.toUpperCase()) return false;
  return stub.url.endsWith("*") ? url.startsWith(stub.url.slice(0, -1)) : url === stub.url;
}

/** A fetch answering from `stubs`, first match first. */
export function stubFetch(stubs: readonly HttpStub[]): typeof fetch {
  const f = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const method = init?.method ?? (input instanceof Request ? input.method : "GET");
    const stub = stubs.find((s) => matches(s, method, url));
    if (!stub) throw new TypeError("the kit has no stub answer for this request");
    return new Response(stub.body ?? "", { status: stub.status ?? 200, headers: stub.headers ?? {} });
  };
  return f as typeof fetch;
}

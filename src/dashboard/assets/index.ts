// Every asset the dashboard serves, embedded in the binary at build time: uPlot (its script and
// stylesheet) and the page script. Nothing is fetched from anywhere at run time.
import uplotJs from "uplot/dist/uPlot.iife.min.js" with { type: "text" };
import uplotCss from "uplot/dist/uPlot.min.css" with { type: "text" };
import client from "./client.js.asset" with { type: "text" };

export const ASSETS: Readonly<Record<string, { type: string; body: string }>> = {
  "/assets/uplot.js": { type: "text/javascript; charset=utf-8", body: uplotJs },
  "/assets/uplot.css": { type: "text/css; charset=utf-8", body: uplotCss },
  "/assets/client.js": { type: "text/javascript; charset=utf-8", body: client },
};

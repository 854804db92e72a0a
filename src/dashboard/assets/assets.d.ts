// The dashboard's embedded assets are imported as text (with { type: "text" }), never run here.
declare module "*.js.asset" {
  const text: string;
  export default text;
}
declare module "uplot/dist/uPlot.iife.min.js" {
  const text: string;
  export default text;
}
declare module "uplot/dist/uPlot.min.css" {
  const text: string;
  export default text;
}

// Text imports (`with { type: "text" }`) used to embed migrations and manifests in the binary.
declare module "*.sql" {
  const text: string;
  export default text;
}
declare module "*.toml" {
  const text: string;
  export default text;
}
declare module "*.md" {
  const text: string;
  export default text;
}
declare module "*.http" {
  const text: string;
  export default text;
}

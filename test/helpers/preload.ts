// Loaded before every test file (bunfig.toml): hermetic defaults.
process.env.HOOKSPOOL_ALERT_DRY = "1";
process.env.TZ = "UTC";
delete process.env.HOOKSPOOL_HOME;
delete process.env.HOOKSPOOL_CONFIG;
delete process.env.HOOKSPOOL_DB;
delete process.env.HOOKSPOOL_TEST_HOOK;

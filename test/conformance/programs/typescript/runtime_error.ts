function fail(): never {
  throw new Error("boom");
}
fail();

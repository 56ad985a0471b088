function boom() {
  throw new Error("boom");
}
boom();

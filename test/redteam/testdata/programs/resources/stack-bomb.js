// Unbounded recursion in V8: RangeError, uncaught.
function down(n) { return down(n + 1) + 1; }
console.log('recursing');
down(0);

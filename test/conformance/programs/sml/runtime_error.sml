val _ = raise Fail "boom";

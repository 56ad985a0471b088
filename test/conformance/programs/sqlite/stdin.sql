CREATE TABLE t(x);
.import --ascii "|cat" t
.separator "" ""
SELECT x FROM t;

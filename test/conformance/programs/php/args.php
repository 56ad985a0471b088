<?php
foreach (array_slice($argv, 1) as $a) echo $a, "\n";

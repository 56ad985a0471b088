<?php
file_put_contents("output.txt", strtoupper(file_get_contents("input.txt")));

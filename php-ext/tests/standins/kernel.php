<?php
// Loads the stand-ins of Exponential's kernel classes (not the queued driver).
require_once __DIR__ . '/ezdebug.php';
require_once __DIR__ . '/ezini.php';
require_once __DIR__ . '/ezdb.php';
require_once __DIR__ . '/ezdbinterface.php';
require_once __DIR__ . '/ezsqlite3db.php';

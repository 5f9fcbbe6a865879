<?php
/**
 * Stand-ins for eZDB's error-handling constants, eZDBException, and the
 * eZSys/eZExecution calls of eZDBInterface::reportError().
 */
class eZDB
{
    const ERROR_HANDLING_STANDARD = 1;
    const ERROR_HANDLING_EXCEPTIONS = 2;
}

class eZDBException extends ezcBaseException
{
}

class ezcBaseException extends Exception
{
    public function __construct( $message, $code = 0 )
    {
        parent::__construct( (string)$message, (int)$code );
    }
}

class eZSys
{
    static function isShellExecution()
    {
        return PHP_SAPI === 'cli';
    }

    static function serverVariable( $variableName, $quiet = false )
    {
        return isset( $_SERVER[$variableName] ) ? $_SERVER[$variableName] : null;
    }
}

class eZExecution
{
    static function cleanup() {}
    static function setCleanExit() {}
}
